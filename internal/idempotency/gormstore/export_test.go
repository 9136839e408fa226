package gormstore

// DeleteExpired is the statement PurgeExpired runs, for the tests that
// read its plan.
func (s *Store) DeleteExpired(limit int) string { return s.deleteExpired(limit) }
