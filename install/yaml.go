package install

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"

	"gopkg.in/yaml.v3"
)

// The YAML client (goose) keeps its servers in a mapping at the top level. The file
// is edited through yaml.v3's node tree, which keeps key order, values and comments;
// the file is only re-encoded when the entry changes. Re-encoding does normalize
// layout: block sequences written flush with their key (as goose writes them) come
// back indented under it, which YAML reads the same.

func malformedYAML(err error) error { return &MalformedError{Format: "YAML", Err: err} }

// parseYAML returns the document and its top-level mapping; an empty file (or one
// of comments only) gives an empty mapping.
func parseYAML(file []byte) (*yaml.Node, *yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(file, &doc); err != nil {
		return nil, nil, malformedYAML(err)
	}
	if doc.Kind != yaml.DocumentNode {
		doc = yaml.Node{Kind: yaml.DocumentNode}
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		if len(doc.Content) > 0 {
			root.HeadComment = doc.Content[0].HeadComment
		}
		doc.Content = []*yaml.Node{root}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, nil, malformedYAML(errors.New("the top level is not a mapping"))
	}
	return &doc, root, nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// mappingIndex returns the index in m.Content of the value under key, or -1.
func mappingIndex(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i + 1
		}
	}
	return -1
}

// yamlMapping returns the mapping under key in m, creating it when absent or null.
func yamlMapping(m *yaml.Node, key string) (*yaml.Node, error) {
	i := mappingIndex(m, key)
	if i < 0 {
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, n)
		return n, nil
	}
	n := m.Content[i]
	if isNull(n) {
		*n = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", LineComment: n.LineComment}
	}
	if n.Kind != yaml.MappingNode {
		return nil, malformedYAML(fmt.Errorf("%q is not a mapping", key))
	}
	return n, nil
}

func encodeYAML(doc *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// addYAML sets container.name to entry.
func addYAML(file []byte, container, name string, entry any) ([]byte, error) {
	doc, root, err := parseYAML(file)
	if err != nil {
		return nil, err
	}
	servers, err := yamlMapping(root, container)
	if err != nil {
		return nil, err
	}
	var val yaml.Node
	if err := val.Encode(entry); err != nil {
		return nil, err
	}
	if i := mappingIndex(servers, name); i >= 0 {
		same, err := equalYAML(servers.Content[i], &val)
		if err != nil {
			return nil, err
		}
		if same {
			return file, nil
		}
		old := servers.Content[i]
		val.HeadComment, val.LineComment, val.FootComment = old.HeadComment, old.LineComment, old.FootComment
		servers.Content[i] = &val
	} else {
		servers.Content = append(servers.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name}, &val)
	}
	return encodeYAML(doc)
}

// removeYAML deletes container.name.
func removeYAML(file []byte, container, name string) ([]byte, error) {
	doc, root, err := parseYAML(file)
	if err != nil {
		return nil, err
	}
	ci := mappingIndex(root, container)
	if ci < 0 || root.Content[ci].Kind != yaml.MappingNode {
		return file, nil
	}
	servers := root.Content[ci]
	i := mappingIndex(servers, name)
	if i < 0 {
		return file, nil
	}
	servers.Content = append(servers.Content[:i-1], servers.Content[i+1:]...)
	return encodeYAML(doc)
}

// equalYAML reports whether two nodes decode to the same value.
func equalYAML(a, b *yaml.Node) (bool, error) {
	var x, y any
	if err := a.Decode(&x); err != nil {
		return false, malformedYAML(err)
	}
	if err := b.Decode(&y); err != nil {
		return false, err
	}
	return reflect.DeepEqual(x, y), nil
}
