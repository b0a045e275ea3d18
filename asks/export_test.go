package asks

// Peak is the most asks s has worked on at once.
func (s *Server) Peak() int64 { return s.peak.Load() }
