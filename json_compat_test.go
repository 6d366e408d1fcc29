package h2file

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"
)

// cfgFileServerJSON is a file_server handler config with every field set
// (TestJSONFixtureSetsEveryFileServerField keeps it so).
const cfgFileServerJSON = `{
	"handler": "file_server",
	"fs": "myfs",
	"root": "/srv/www",
	"hide": [".git", "/srv/www/private"],
	"index_names": ["index.htm", "default.html"],
	"browse": {
		"template_file": "/etc/caddy/listing.html",
		"reveal_symlinks": true,
		"sort": ["size", "desc"],
		"file_limit": 100,
		"plain_time_format": "2006-01-02"
	},
	"canonical_uris": false,
	"status_code": 203,
	"pass_thru": true,
	"precompressed": {"br": {}, "gzip": {}},
	"precompressed_order": ["br", "gzip"],
	"etag_file_extensions": [".etag", ".sha256"]
}`

// cfgFixtureHandler is what cfgFileServerJSON must decode to.
func cfgFixtureHandler() Handler {
	return Handler{
		FileSystem: "myfs",
		Root:       "/srv/www",
		Hide:       []string{".git", "/srv/www/private"},
		IndexNames: []string{"index.htm", "default.html"},
		Browse: &fileserver.Browse{
			TemplateFile:    "/etc/caddy/listing.html",
			RevealSymlinks:  true,
			SortOptions:     []string{"size", "desc"},
			FileLimit:       100,
			PlainTimeFormat: "2006-01-02",
		},
		CanonicalURIs:      cfgBool(false),
		StatusCode:         "203",
		PassThru:           true,
		PrecompressedRaw:   caddy.ModuleMap{"br": json.RawMessage(`{}`), "gzip": json.RawMessage(`{}`)},
		PrecompressedOrder: []string{"br", "gzip"},
		EtagFileExtensions: []string{".etag", ".sha256"},
	}
}

// cfgRenameHandler returns raw with its "handler" changed from "from" to
// "to", and nothing else changed.
func cfgRenameHandler(t *testing.T, raw, from, to string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatal(err)
	}
	var name string
	if err := json.Unmarshal(m["handler"], &name); err != nil || name != from {
		t.Fatalf("handler is %s, want %q", m["handler"], from)
	}
	m["handler"], _ = json.Marshal(to)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// cfgWithoutHandler removes the "handler" key, as Caddy does before it
// decodes a handler module's config.
func cfgWithoutHandler(t *testing.T, raw []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "handler")
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// cfgStrictDecode decodes raw into v, failing on unknown fields.
func cfgStrictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// cfgJSONMap marshals v and unmarshals it into a generic map, to compare
// configs by their JSON.
func cfgJSONMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// cfgJSONName returns the JSON name of a struct field and whether it has
// omitempty.
func cfgJSONName(f reflect.StructField) (name string, omitempty bool) {
	tag := f.Tag.Get("json")
	name, opts, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, strings.Contains(","+opts+",", ",omitempty,")
}

// cfgExportedFields returns the exported fields of struct type typ by JSON
// name.
func cfgExportedFields(typ reflect.Type) map[string]reflect.StructField {
	fields := make(map[string]reflect.StructField)
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() || f.Tag.Get("json") == "-" {
			continue
		}
		name, _ := cfgJSONName(f)
		fields[name] = f
	}
	return fields
}

// cfgZeroFields lists the exported fields of the struct v that are zero,
// and of the struct they point to, if any.
func cfgZeroFields(v reflect.Value, prefix string) []string {
	var zero []string
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		name, _ := cfgJSONName(f)
		if fv.IsZero() {
			zero = append(zero, prefix+name)
			continue
		}
		if fv.Kind() == reflect.Pointer && fv.Elem().Kind() == reflect.Struct {
			zero = append(zero, cfgZeroFields(fv.Elem(), prefix+name+".")...)
		}
	}
	return zero
}

// Handler has every field of file_server, with the same JSON name, tags and
// type; fields of its own are optional, so that a Handler without them is
// a valid file_server config.
func TestJSONFieldsMatchFileServer(t *testing.T) {
	hFields := cfgExportedFields(reflect.TypeFor[Handler]())
	fsFields := cfgExportedFields(reflect.TypeFor[fileserver.FileServer]())
	for name, fsf := range fsFields {
		hf, ok := hFields[name]
		if !ok {
			t.Errorf("file_server field %q (%s) is missing from Handler", name, fsf.Name)
			continue
		}
		if hf.Type != fsf.Type {
			t.Errorf("field %q: Handler.%s is %s, file_server's is %s", name, hf.Name, hf.Type, fsf.Type)
		}
		if hf.Tag.Get("json") != fsf.Tag.Get("json") {
			t.Errorf("field %q: json tag %q, file_server's is %q", name, hf.Tag.Get("json"), fsf.Tag.Get("json"))
		}
		if hf.Tag.Get("caddy") != fsf.Tag.Get("caddy") {
			t.Errorf("field %q: caddy tag %q, file_server's is %q", name, hf.Tag.Get("caddy"), fsf.Tag.Get("caddy"))
		}
	}
	for name, hf := range hFields {
		if _, ok := fsFields[name]; ok {
			continue
		}
		if _, omitempty := cfgJSONName(hf); !omitempty {
			t.Errorf("h2_file_server-only field %q (%s) lacks omitempty: a default Handler would not be a file_server config", name, hf.Name)
		}
		t.Logf("h2_file_server-only field: %q (%s)", name, hf.Type)
	}
}

// The fixture must set every field that file_server has, or the tests
// below would not check them all.
func TestJSONFixtureSetsEveryFileServerField(t *testing.T) {
	var fsrv fileserver.FileServer
	if err := cfgStrictDecode(cfgWithoutHandler(t, []byte(cfgFileServerJSON)), &fsrv); err != nil {
		t.Fatalf("file_server rejects the fixture: %v", err)
	}
	if zero := cfgZeroFields(reflect.ValueOf(fsrv), ""); len(zero) > 0 {
		t.Errorf("fixture leaves file_server fields unset: %q", zero)
	}
	h := cfgFixtureHandler()
	var fileServerZero []string
	fsFields := cfgExportedFields(reflect.TypeFor[fileserver.FileServer]())
	for _, name := range cfgZeroFields(reflect.ValueOf(h), "") {
		if _, ok := fsFields[strings.SplitN(name, ".", 2)[0]]; ok {
			fileServerZero = append(fileServerZero, name)
		}
	}
	if len(fileServerZero) > 0 {
		t.Errorf("cfgFixtureHandler leaves file_server fields unset: %q", fileServerZero)
	}
}

// A file_server JSON config works for h2_file_server by changing only the
// handler name: every field is decoded, none is dropped.
func TestJSONFileServerConfigDecodesIntoHandler(t *testing.T) {
	raw := cfgRenameHandler(t, cfgFileServerJSON, "file_server", "h2_file_server")

	var h Handler
	if err := cfgStrictDecode(cfgWithoutHandler(t, raw), &h); err != nil {
		t.Fatalf("decoding a file_server config into Handler: %v", err)
	}
	if want := cfgFixtureHandler(); !reflect.DeepEqual(h, want) {
		t.Errorf("decoded:\n%s\nwant:\n%s", cfgJSON(h), cfgJSON(want))
	}

	// and it encodes back to the same fields file_server encodes to
	var fsrv fileserver.FileServer
	if err := cfgStrictDecode(cfgWithoutHandler(t, []byte(cfgFileServerJSON)), &fsrv); err != nil {
		t.Fatal(err)
	}
	if got, want := cfgJSONMap(t, h), cfgJSONMap(t, fsrv); !reflect.DeepEqual(got, want) {
		t.Errorf("Handler encodes to\n%s\nfile_server to\n%s", cfgJSON(got), cfgJSON(want))
	}
}

// The same, through Caddy's own module loader, which is what `caddy run`
// does with the config: a route's handle list, with the handler name as
// inline key, strictly decoded and provisioned.
func TestJSONFileServerConfigLoadsAsModule(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()

	for _, name := range []string{"file_server", "h2_file_server"} {
		raw := cfgRenameHandler(t, cfgFileServerJSON, "file_server", name)
		route := caddyhttp.Route{HandlersRaw: []json.RawMessage{raw}}
		mods, err := ctx.LoadModule(&route, "HandlersRaw")
		if err != nil {
			t.Fatalf("loading the fixture as %s: %v", name, err)
		}
		handlers := mods.([]any)
		if len(handlers) != 1 {
			t.Fatalf("%s: loaded %d handlers", name, len(handlers))
		}
		if name == "file_server" {
			continue // the fixture is a valid file_server config
		}
		h, ok := handlers[0].(*Handler)
		if !ok {
			t.Fatalf("h2_file_server loaded as %T", handlers[0])
		}
		want := cfgFixtureHandler()
		// loading consumes the module map, into the precompressors
		for _, f := range []struct {
			name      string
			got, want any
		}{
			{"fs", h.FileSystem, want.FileSystem},
			{"root", h.Root, want.Root},
			{"hide", h.Hide, want.Hide},
			{"index_names", h.IndexNames, want.IndexNames},
			{"browse", h.Browse, want.Browse},
			{"canonical_uris", h.CanonicalURIs, want.CanonicalURIs},
			{"status_code", h.StatusCode, want.StatusCode},
			{"pass_thru", h.PassThru, want.PassThru},
			{"precompressed_order", h.PrecompressedOrder, want.PrecompressedOrder},
			{"etag_file_extensions", h.EtagFileExtensions, want.EtagFileExtensions},
		} {
			if !reflect.DeepEqual(f.got, f.want) {
				t.Errorf("%s = %#v, want %#v", f.name, f.got, f.want)
			}
		}
		var encodings []string
		for ae := range h.precompressors {
			encodings = append(encodings, ae)
		}
		if len(h.precompressors) != 2 || h.precompressors["br"] == nil || h.precompressors["gzip"] == nil {
			t.Errorf("precompressors for %q, want br and gzip", encodings)
		}
	}
}

// The reverse: a Handler with every file_server field set encodes to JSON
// that file_server decodes strictly, to the same values.
func TestJSONHandlerEncodesToFileServerConfig(t *testing.T) {
	h := cfgFixtureHandler()
	raw, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var fsrv fileserver.FileServer
	if err := cfgStrictDecode(raw, &fsrv); err != nil {
		t.Fatalf("file_server cannot decode %s: %v", raw, err)
	}
	if zero := cfgZeroFields(reflect.ValueOf(fsrv), ""); len(zero) > 0 {
		t.Errorf("fields lost on the way to file_server: %q", zero)
	}
	if got, want := cfgJSONMap(t, fsrv), cfgJSONMap(t, h); !reflect.DeepEqual(got, want) {
		t.Errorf("file_server decoded\n%s\nfrom\n%s", cfgJSON(got), cfgJSON(want))
	}

	// field by field, by JSON name
	hv, fv := reflect.ValueOf(h), reflect.ValueOf(fsrv)
	hFields := cfgExportedFields(hv.Type())
	for name, fsf := range cfgExportedFields(fv.Type()) {
		hf, ok := hFields[name]
		if !ok {
			continue // reported by TestJSONFieldsMatchFileServer
		}
		got, want := fv.FieldByIndex(fsf.Index).Interface(), hv.FieldByIndex(hf.Index).Interface()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: file_server got %#v, want %#v", name, got, want)
		}
	}
}

// A zero Handler encodes to an empty object, which file_server accepts.
func TestJSONZeroHandler(t *testing.T) {
	raw, err := json.Marshal(Handler{})
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != "{}" {
		t.Errorf("zero Handler encodes to %s, want {}", raw)
	}
}
