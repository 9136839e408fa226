// IdempotencyKeyPlugin fills the Idempotency-Key header of a keyed POST with
// a fresh key when the reader presses Try it out, and keeps that key, so
// that a second Execute sends the same request again and shows the replay.
// "New key" next to the field makes another one: a new logical operation.
// The OpenAPI document itself has no default key, which every reader would
// share.
function IdempotencyKeyPlugin(system) {
  const h = system.React.createElement;
  const isKeyHeader = (p) => p && p.get('in') === 'header' && p.get('name') === 'Idempotency-Key';
  const newKey = () => crypto.randomUUID();

  return {
    wrapComponents: {
      parameterRow: (Original, sys) => (props) => {
        const { rawParam, param, pathMethod, isExecute, specActions } = props;
        const keyed = isKeyHeader(rawParam);
        const value = param && param.get('value');
        // Set as typing sets it (by the parameter's identity), once: a key
        // that is there, typed or filled, stays until "New key".
        sys.React.useEffect(() => {
          if (keyed && isExecute && value === undefined) {
            specActions.changeParamByIdentity(pathMethod, rawParam, newKey());
          }
        }, [keyed, isExecute, value === undefined]);
        if (!keyed || !isExecute) return h(Original, props);
        return h(sys.React.Fragment, null,
          h(Original, props),
          h('tr', { className: 'idempotency-key-tools' },
            h('td', { colSpan: 2 },
              h('button', {
                type: 'button',
                className: 'btn',
                'data-new-idempotency-key': '',
                title: 'A new key is a new operation: the next Execute runs it, not a replay',
                onClick: () => specActions.changeParamByIdentity(pathMethod, rawParam, newKey()),
              }, 'New key'),
              h('span', { style: { marginLeft: '0.75em' } },
                'Execute again with the same key to see the stored answer replayed.'))));
      },
    },
  };
}
