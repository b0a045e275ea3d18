package oauth

import "context"

// DocumentClient is documentClient, for the tests.
var DocumentClient = documentClient

// Pending counts the authorization requests in progress, as admitRequest does.
func (s *Server) Pending(ctx context.Context) (int, error) {
	return s.records.count(ctx, s.records.requests, "req.>")
}
