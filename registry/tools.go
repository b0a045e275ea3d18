package registry

import (
	"context"

	"github.com/toolgate/toolgate/bus/wire"
)

// PutTool writes a tool's record, as its workers would: it refuses one the edges
// would ignore.
func (s *Store) PutTool(ctx context.Context, t Tool) error {
	if err := wire.CheckTool(&t); err != nil {
		return invalidf("%v", err)
	}
	if err := wire.CheckSchemas(&t); err != nil {
		return invalidf("%v", err)
	}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = now()
	}
	return s.lastingPut(ctx, s.tools, t.ID, t)
}

// Tool reads a tool's record.
func (s *Store) Tool(ctx context.Context, id string) (*Tool, error) {
	t, _, err := getJSON[Tool](ctx, s, s.tools, id)
	return t, err
}

// DeleteTool removes a tool's record.
func (s *Store) DeleteTool(ctx context.Context, id string) error {
	return s.lastingDelete(ctx, s.tools, id)
}
