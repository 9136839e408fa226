package merchants

// UnknownKeysCachedForTest is how many unknown keys s remembers.
func UnknownKeysCachedForTest(s *Store) int {
	s.unknown.mu.Lock()
	defer s.unknown.mu.Unlock()
	return len(s.unknown.entries)
}
