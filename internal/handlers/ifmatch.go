package handlers

// IfMatchPattern is the If-Match header that toPrecondition accepts, as a
// regular expression that scripts/openapifix writes into the OpenAPI
// document (FuzzPrecondition holds the two together): "*" with optional
// white space around it (as strings.TrimSpace trims it: space, tab and the
// Unicode spaces, written here as themselves), or a list of entity tags,
// strong or weak (W/), each of visible ASCII other than the double quote or
// of non-ASCII characters, separated by commas, with empty elements and
// spaces or tabs between them allowed (RFC 9110 §5.6.1). An empty list is
// accepted too, and matches no version (412).
const IfMatchPattern = `^(?:[` + ifMatchSpace + `]*\*[` + ifMatchSpace + `]*|[ \t,]*(?:(?:W/)?"[^"\x00-\x20\x7F]*"[ \t]*(?:,[ \t,]*|$))*)$`

// ifMatchSpace is what strings.TrimSpace trims from a header value: the
// Unicode White_Space characters that net/http lets through (tab, space and
// those from U+0085 on; the other controls are refused before the API).
const ifMatchSpace = ` \t` + "\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000"
