package checkpoint

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

type rec struct {
	Name string   `json:"name"`
	IDs  []string `json:"ids,omitempty"`
}

type data struct {
	Recs []rec `json:"recs"`
}

func TestRoundTrip(t *testing.T) {
	in := data{Recs: []rec{{Name: "a", IDs: []string{"x", "y"}}, {Name: "b"}}}
	b, err := Encode(3, &in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":3,"checksum":"` + Checksum([]byte(`{"recs":[{"name":"a","ids":["x","y"]},{"name":"b"}]}`)) +
		`","data":{"recs":[{"name":"a","ids":["x","y"]},{"name":"b"}]}}`
	if string(b) != want {
		t.Fatalf("Encode = %s\nwant     %s", b, want)
	}
	for name, decode := range map[string]func([]byte, int, any) error{"Decode": Decode, "DecodeCanonical": DecodeCanonical} {
		var out data
		if err := decode(b, 3, &out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(out.Recs) != 2 || out.Recs[0].Name != "a" || len(out.Recs[0].IDs) != 2 || out.Recs[1].Name != "b" {
			t.Fatalf("%s = %+v", name, out)
		}
	}
}

func TestBad(t *testing.T) {
	good, err := Encode(1, &data{Recs: []rec{{Name: "a", IDs: []string{"f1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		b          []byte
	}{
		{name: "not JSON", b: []byte(`{"version":1,"chec`), want: "unexpected end"},
		{name: "another version", b: bytes.Replace(good, []byte(`"version":1`), []byte(`"version":2`), 1), want: "version 2, want 1"},
		{name: "a changed value", b: bytes.Replace(good, []byte(`"f1"`), []byte(`"f2"`), 1), want: "checksum"},
		{name: "a wrong checksum", b: []byte(`{"version":1,"checksum":"sha256:00","data":{"recs":[]}}`), want: "checksum"},
		{name: "no data", b: []byte(`{"version":1,"checksum":"x"}`), want: ""},
		{name: "data of another shape", b: []byte(`{"version":1,"checksum":"` + Checksum([]byte(`{"recs":3}`)) + `","data":{"recs":3}}`), want: "data:"},
	} {
		for name, decode := range map[string]func([]byte, int, any) error{"Decode": Decode, "DecodeCanonical": DecodeCanonical} {
			var out data
			err := decode(tc.b, 1, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s %s = %v, want an error with %q", tc.name, name, err, tc.want)
			}
		}
	}
}

// DecodeCanonical reads a checkpoint re-indented by hand; Decode does not.
func TestIndented(t *testing.T) {
	b, err := Encode(1, &data{Recs: []rec{{Name: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	var out data
	if err := DecodeCanonical(pretty.Bytes(), 1, &out); err != nil || len(out.Recs) != 1 {
		t.Fatalf("DecodeCanonical of an indented checkpoint = %+v, %v", out, err)
	}
	if err := Decode(pretty.Bytes(), 1, &out); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("Decode of an indented checkpoint = %v, want a checksum error", err)
	}
}
