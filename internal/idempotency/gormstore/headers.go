package gormstore

import (
	"encoding/json"
	"fmt"
)

// storedHeaders are the only headers a stored response keeps: never
// Authorization, cookies or anything else a request or response carried.
type storedHeaders struct {
	ContentType string `json:"Content-Type,omitempty"`
	Location    string `json:"Location,omitempty"`
}

func encodeHeaders(contentType, location string) string {
	b, _ := json.Marshal(storedHeaders{ContentType: contentType, Location: location})
	return string(b)
}

func decodeHeaders(s string) (contentType, location string, err error) {
	var h storedHeaders
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return "", "", fmt.Errorf("%w: %w", errBadHeaders, err)
	}
	return h.ContentType, h.Location, nil
}
