package manifests

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// TestSettingsSchemaFollowsTheStruct: a setting's schema is its field's,
// named by its json tag; json:"-" fields (tunables for tests) and
// unexported ones are no settings; an enum tag lists the values taken; a
// nested struct refuses unknown fields as the server's strict decoding
// does.
func TestSettingsSchemaFollowsTheStruct(t *testing.T) {
	type nested struct {
		Limit int `json:"limit"`
	}
	type settings struct {
		Mode     string   `json:"mode,omitempty" enum:"a,b"`
		Users    []string `json:"users"`
		On       *bool    `json:"on,omitempty"`
		Nested   nested   `json:"nested"`
		Internal int      `json:"-"`
		Untagged string
		hidden   string
	}
	_ = settings{}.hidden
	s, names, err := settingsSchema(reflect.TypeOf(&settings{}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"mode", "users", "on", "nested"}) {
		t.Errorf("settings %v, want mode, users, on, nested", names)
	}
	var buf bytes.Buffer
	encodeOrdered(&buf, s, "")
	var got any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","additionalProperties":false,"properties":{` +
		`"mode":{"type":"string","enum":["a","b"]},` +
		`"users":{"type":"array","items":{"type":"string"}},` +
		`"on":{"type":"boolean"},` +
		`"nested":{"type":"object","additionalProperties":false,"properties":{"limit":{"type":"integer"}}}}}`
	var wantV any
	if err := json.Unmarshal([]byte(want), &wantV); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantV) {
		t.Errorf("schema %s\nwant %s", buf.Bytes(), want)
	}
	if _, _, err := settingsSchema(reflect.TypeOf(struct {
		F func() `json:"f"`
	}{})); err == nil {
		t.Error("a func setting has a schema; want an error")
	}
}

// TestOrderedJSONKeepsTheFile: decoding and encoding again keeps members
// in their order, so that the generated values schema differs from the
// committed one only where a setting changed.
func TestOrderedJSONKeepsTheFile(t *testing.T) {
	in := "{\n  \"z\": 1,\n  \"a\": [\n    \"<x>\",\n    true,\n    null\n  ],\n  \"m\": {},\n  \"e\": []\n}"
	v, err := decodeOrdered(json.NewDecoder(bytes.NewReader([]byte(in))))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	encodeOrdered(&out, v, "")
	if out.String() != in {
		t.Errorf("round trip:\n%s\nwant\n%s", out.String(), in)
	}
}
