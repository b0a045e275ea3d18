package asks

// Peak is the most asks s has worked on at once.
func (s *Server) Peak() int64 { return s.peak.Load() }

// ReadPartsWithGetBytes makes s read a payload's parts with the object store's
// GetBytes, as it first did, for benchmarks that compare.
func ReadPartsWithGetBytes(s *Server) { s.getBytes = true }
