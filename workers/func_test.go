package workers_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/workers"
)

type searchIn struct {
	Query   string            `json:"query" jsonschema:"what to look for"`
	Limit   int               `json:"limit,omitempty"`
	Since   *time.Time        `json:"since,omitempty"`
	Tags    []string          `json:"tags,omitempty"`
	Filters map[string]string `json:"filters,omitzero"`
	Page    struct {
		Cursor string `json:"cursor"`
	} `json:"page,omitzero"`
}

type searchOut struct {
	Hits  []hit `json:"hits"`
	Total int   `json:"total"`
}

type hit struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
}

// compile compiles schema as the registry does: JSON Schema 2020-12, formats asserted.
func compile(t *testing.T, schema []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("test:///schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("test:///schema.json")
	if err != nil {
		t.Fatalf("schema does not compile as 2020-12: %v\n%s", err, schema)
	}
	return s
}

func TestFuncInfersSchemas(t *testing.T) {
	m := workers.Func("search", "Searches", func(context.Context, *workers.Call, searchIn) (searchOut, error) {
		return searchOut{}, nil
	})
	in := compile(t, m.InputSchema)
	out := compile(t, m.OutputSchema)

	valid := func(s *jsonschema.Schema, doc string) error {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		return s.Validate(v)
	}
	tests := []struct {
		name   string
		schema *jsonschema.Schema
		doc    string
		ok     bool
	}{
		{"the required field alone is valid input", in, `{"query":"go"}`, true},
		{"every optional field is accepted", in, `{"query":"go","limit":3,"since":"2026-01-02T03:04:05Z","tags":["a"],"filters":{"k":"v"},"page":{"cursor":"c"}}`, true},
		{"a missing required field is refused", in, `{"limit":3}`, false},
		{"a field of the wrong type is refused", in, `{"query":"go","limit":"three"}`, false},
		{"an unknown field is refused", in, `{"query":"go","lang":"en"}`, false},
		{"a result of the declared shape is valid output", out, `{"hits":[{"id":"x","score":0.5}],"total":1}`, true},
		{"a result missing a field is invalid output", out, `{"hits":[]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := valid(tt.schema, tt.doc)
			if tt.ok && err != nil {
				t.Errorf("refused: %v", err)
			}
			if !tt.ok && err == nil {
				t.Error("accepted")
			}
		})
	}

	t.Run("a jsonschema tag becomes the field's description", func(t *testing.T) {
		if !strings.Contains(string(m.InputSchema), `"description":"what to look for"`) {
			t.Errorf("input schema: %s", m.InputSchema)
		}
	})
	t.Run("a result of any type has no output schema", func(t *testing.T) {
		m := workers.Func("any", "", func(context.Context, *workers.Call, struct{}) (any, error) { return nil, nil })
		if m.OutputSchema != nil {
			t.Errorf("output schema: %s", m.OutputSchema)
		}
	})
	t.Run("a Raw result has no output schema", func(t *testing.T) {
		m := workers.Func("raw", "", func(context.Context, *workers.Call, struct{}) (workers.Raw, error) { return workers.Raw{}, nil })
		if m.OutputSchema != nil {
			t.Errorf("output schema: %s", m.OutputSchema)
		}
	})
}
