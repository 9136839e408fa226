package handlers

// ToStoredResponseForTest exposes the converter's body encoding to the
// external tests.
var ToStoredResponseForTest = toStoredResponse
