package main

import (
	"context"
	"errors"
)

func runJetStream(context.Context, config, *handler) error {
	return errors.New("OUTBOX_SINK=nats: not built yet")
}
