package wire

import (
	"math"
	"math/big"
	"reflect"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// PlainSchema is a compiled input schema made only of the keywords most tools'
// schemas use (type, properties, required, additionalProperties, enum of strings,
// booleans and null, minLength/maxLength, minimum/maximum and their exclusive forms,
// format, items, minItems/maxItems), checked against a call's parameters as they
// are read, without decoding them. It is built from the library's compiled schema,
// so each keyword means what the library made of it (draft, format assertion), and
// it answers only "valid": anything it cannot be sure of (a refusal, a number it
// would have to round, a string it would have to decode) is left to the library,
// whose answer and error texts are the ones a caller gets.
//
// Profiles put the library's check, with the instance decoded for it, at 10 to 16%
// of the edge's handler; the check on the bytes costs a fraction of it and
// allocates nothing for the usual object of strings and numbers.
type PlainSchema struct{ root *plainNode }

// plainNode is one schema of a PlainSchema: nil, or a node with no keyword, takes
// any JSON value.
type plainNode struct {
	types   uint8 // the plain* bits; 0 is any type
	enum    *plainEnum
	format  func(any) error
	minLen  int // -1 when absent, as maxLen
	maxLen  int
	numbers *plainBounds

	fields     map[string]plainField // properties and required names
	required   uint64                // a bit per required name
	closed     bool                  // additionalProperties false
	additional *plainNode            // additionalProperties as a schema

	items              *plainNode
	minItems, maxItems int // -1 when absent
}

// plainField is what an object's member named so meets: the schema of its value
// (nil: the object's additional properties' rule), and its bit when it is required.
type plainField struct {
	known bool // listed in properties
	node  *plainNode
	bit   uint64
}

// plainEnum is an enum of strings, booleans and null; an enum with a number, an
// array or an object is left to the library (it compares numbers by value).
type plainEnum struct {
	strings                   map[string]bool
	null, isTrue, isFalse     bool
	hasStrings, hasNonStrings bool
}

// plainBounds are a number's bounds: inclusive int64 bounds for an integer written
// without fraction or exponent, and the exact ones for any other number.
type plainBounds struct {
	intMin, intMax             int64
	min, max, exclMin, exclMax *big.Rat
}

const (
	plainNull uint8 = 1 << iota
	plainBoolean
	plainNumber
	plainInteger
	plainString
	plainArray
	plainObject
)

// handledFields are the fields of the library's compiled schema a PlainSchema
// checks, or that do not bear on validation (annotations, identifiers). A schema
// that sets any other field, one a later version of the library adds included, is
// left to the library.
var handledFields = map[string]bool{
	"DraftVersion": true, "Location": true, "ID": true, "Anchor": true, "DynamicAnchor": true, "RecursiveAnchor": true,
	"Bool": true, "Types": true, "Enum": true, "Format": true,
	"Required": true, "Properties": true, "AdditionalProperties": true,
	"MinItems": true, "MaxItems": true, "Items": true, "Items2020": true,
	"MinLength": true, "MaxLength": true,
	"Maximum": true, "Minimum": true, "ExclusiveMaximum": true, "ExclusiveMinimum": true,
	"Title": true, "Description": true, "Default": true, "Comment": true, "ReadOnly": true,
	"WriteOnly": true, "Examples": true, "Deprecated": true,
}

// maxPlainDepth bounds how deep a schema a PlainSchema takes; deeper ones (and
// cycles, which only $ref makes and which are refused anyway) are the library's.
const maxPlainDepth = 32

// Plain returns s as a PlainSchema, or nil when s uses a keyword it does not check
// (or is nil: no schema compiled).
func Plain(s *jsonschema.Schema) *PlainSchema {
	if s == nil {
		return nil
	}
	root, ok := plainOf(s, 0)
	if !ok {
		return nil
	}
	return &PlainSchema{root: root}
}

func plainOf(s *jsonschema.Schema, depth int) (*plainNode, bool) {
	if s == nil {
		return nil, true
	}
	if depth > maxPlainDepth || !onlyHandledFields(s) {
		return nil, false
	}
	if s.Bool != nil {
		return nil, *s.Bool // true takes anything; false is the library's to refuse
	}
	n := &plainNode{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	if s.Types != nil {
		n.types = plainTypes(*s.Types)
	}
	if s.Format != nil {
		if s.Format.Name == "regex" {
			return nil, false // checked by the validator's regexp engine when it has one
		}
		n.format = s.Format.Validate
	}
	n.minLen, n.maxLen = intOr(s.MinLength), intOr(s.MaxLength)
	n.minItems, n.maxItems = intOr(s.MinItems), intOr(s.MaxItems)
	var ok bool
	if n.enum, ok = plainEnumOf(s.Enum); !ok {
		return nil, false
	}
	if n.numbers, ok = plainBoundsOf(s); !ok {
		return nil, false
	}
	if !n.objectOf(s, depth) {
		return nil, false
	}
	items := s.Items2020
	if s.Items != nil {
		sub, single := s.Items.(*jsonschema.Schema)
		if !single {
			return nil, false // a tuple's items
		}
		items = sub
	}
	if n.items, ok = plainOf(items, depth+1); !ok {
		return nil, false
	}
	return n, true
}

func (n *plainNode) objectOf(s *jsonschema.Schema, depth int) bool {
	if len(s.Required) > 64 { // a bit each in a uint64
		return false
	}
	n.fields = make(map[string]plainField, len(s.Properties)+len(s.Required))
	for name, sub := range s.Properties {
		sn, ok := plainOf(sub, depth+1)
		if !ok {
			return false
		}
		n.fields[name] = plainField{known: true, node: sn}
	}
	for i, name := range s.Required {
		f := n.fields[name]
		f.bit |= 1 << i
		n.required |= 1 << i
		n.fields[name] = f
	}
	switch a := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		n.closed = !a
	case *jsonschema.Schema:
		sn, ok := plainOf(a, depth+1)
		if !ok {
			return false
		}
		n.additional = sn
	default:
		return false
	}
	return true
}

func onlyHandledFields(s *jsonschema.Schema) bool {
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.IsExported() && !handledFields[f.Name] && !v.Field(i).IsZero() {
			return false
		}
	}
	return true
}

func plainTypes(tt jsonschema.Types) uint8 {
	var bits uint8
	for _, name := range tt.ToStrings() {
		switch name {
		case "null":
			bits |= plainNull
		case "boolean":
			bits |= plainBoolean
		case "number":
			bits |= plainNumber
		case "integer":
			bits |= plainInteger
		case "string":
			bits |= plainString
		case "array":
			bits |= plainArray
		case "object":
			bits |= plainObject
		}
	}
	return bits
}

func plainEnumOf(e *jsonschema.Enum) (*plainEnum, bool) {
	if e == nil {
		return nil, true
	}
	pe := &plainEnum{strings: map[string]bool{}}
	for _, v := range e.Values {
		switch v := v.(type) {
		case string:
			pe.strings[v] = true
			pe.hasStrings = true
		case bool:
			pe.isTrue = pe.isTrue || v
			pe.isFalse = pe.isFalse || !v
			pe.hasNonStrings = true
		case nil:
			pe.null = true
			pe.hasNonStrings = true
		default:
			return nil, false
		}
	}
	return pe, true
}

func plainBoundsOf(s *jsonschema.Schema) (*plainBounds, bool) {
	if s.Minimum == nil && s.Maximum == nil && s.ExclusiveMinimum == nil && s.ExclusiveMaximum == nil {
		return nil, true
	}
	b := &plainBounds{intMin: math.MinInt64, intMax: math.MaxInt64,
		min: s.Minimum, max: s.Maximum, exclMin: s.ExclusiveMinimum, exclMax: s.ExclusiveMaximum}
	// An integer n meets minimum m when n >= ceil(m), exclusiveMinimum e when
	// n >= floor(e)+1, and the mirror images for the maxima.
	lows := []*big.Int{ceilRat(s.Minimum), addInt(floorRat(s.ExclusiveMinimum), 1)}
	highs := []*big.Int{floorRat(s.Maximum), addInt(ceilRat(s.ExclusiveMaximum), -1)}
	for _, lo := range lows {
		if lo == nil {
			continue
		}
		if !lo.IsInt64() {
			return nil, false
		}
		b.intMin = max(b.intMin, lo.Int64())
	}
	for _, hi := range highs {
		if hi == nil {
			continue
		}
		if !hi.IsInt64() {
			return nil, false
		}
		b.intMax = min(b.intMax, hi.Int64())
	}
	return b, true
}

func floorRat(r *big.Rat) *big.Int {
	if r == nil {
		return nil
	}
	return new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: the floor, the denominator being positive
}

func ceilRat(r *big.Rat) *big.Int {
	if r == nil {
		return nil
	}
	q := floorRat(r)
	if !r.IsInt() {
		q.Add(q, big.NewInt(1))
	}
	return q
}

func addInt(x *big.Int, d int64) *big.Int {
	if x == nil {
		return nil
	}
	return x.Add(x, big.NewInt(d))
}

func intOr(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
