package h2file

// Configuration parity with Caddy's file_server: every Caddyfile snippet
// and every JSON handler config here goes through both file_server and
// h2_file_server (the Caddyfile adapter, then Provision), and both must
// accept it or both reject it with the same words (but for the directive
// name), and when accepted give the same JSON.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"
)

// parityCaddyfiles are directive snippets; "DIR" stands for the directive
// name. Each goes into a site block of its own.
var parityCaddyfiles = []string{
	// the directive line
	"DIR",
	"DIR browse",
	"DIR foo",
	"DIR browse extra",
	"DIR /static/* browse",
	"DIR {\n}",
	"DIR browse {\n\tbrowse\n}",
	"DIR {\n\tbogus\n}",
	"DIR {\n\tbogus arg\n}",
	"DIR {\n\tunrecognized\n}",

	// fs
	"DIR {\n\tfs\n}",
	"DIR {\n\tfs a\n}",
	"DIR {\n\tfs a b\n}",
	"DIR {\n\tfs a\n\tfs b\n}",
	"DIR {\n\tfs a pass_thru\n}",

	// root: the last one wins; a token left on the line is the next
	// subdirective
	"DIR {\n\troot\n}",
	"DIR {\n\troot /a\n}",
	"DIR {\n\troot /a /b\n}",
	"DIR {\n\troot /a\n\troot /b\n}",
	"DIR {\n\troot /a pass_thru\n}",
	"DIR {\n\troot {\n\t}\n}",

	// hide adds up
	"DIR {\n\thide\n}",
	"DIR {\n\thide a\n}",
	"DIR {\n\thide a b\n\thide /c\n}",

	// index: the last one wins
	"DIR {\n\tindex\n}",
	"DIR {\n\tindex a.html b.html\n}",
	"DIR {\n\tindex a.html\n\tindex b.html\n}",

	// browse and its block
	"DIR {\n\tbrowse\n}",
	"DIR {\n\tbrowse tpl.html\n}",
	"DIR {\n\tbrowse tpl.html extra\n}",
	"DIR {\n\tbrowse {\n\t}\n}",
	"DIR {\n\tbrowse\n\tbrowse\n}",
	"DIR {\n\tbrowse {\n\t\tbogus\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\troot /x\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\treveal_symlinks\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\treveal_symlinks yes\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\treveal_symlinks\n\t\treveal_symlinks\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tsort\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tsort size\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tsort time asc\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tsort size\n\t\tsort desc\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tsort\n\t\tsort namedirfirst desc\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tsort upwards\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tsort desc\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tsort name size\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tsort size desc name\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tsort name\n\t\tsort name\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tfile_limit\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tfile_limit 5\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tfile_limit -1\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tfile_limit 0\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tfile_limit 0\n\t\tfile_limit 5\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tfile_limit 0\n\t\tfile_limit 0\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tfile_limit 5\n\t\tfile_limit 0\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tfile_limit 5\n\t\tfile_limit 6\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tfile_limit 1 2\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tfile_limit many\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tfile_limit 1.5\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tplain_time_format\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tplain_time_format 2006-01-02\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tplain_time_format \"\"\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tplain_time_format 2006 01\n\t}\n}",
	"DIR {\n\tbrowse {\n\t\tplain_time_format 2006\n\t\tplain_time_format 01\n\t}\n}",
	"DIR browse {\n\tbrowse {\n\t\tfile_limit 3\n\t}\n}",

	// precompressed: the order is replaced, the encoders add up
	"DIR {\n\tprecompressed\n}",
	"DIR {\n\tprecompressed gzip\n}",
	"DIR {\n\tprecompressed zstd gzip br\n}",
	"DIR {\n\tprecompressed gzip gzip\n}",
	"DIR {\n\tprecompressed gzip br gzip\n}",
	"DIR {\n\tprecompressed bogus\n}",
	"DIR {\n\tprecompressed br bogus\n}",
	"DIR {\n\tprecompressed gzip\n\tprecompressed br\n}",
	"DIR {\n\tprecompressed\n\tprecompressed gzip\n}",
	"DIR {\n\tprecompressed {\n\t}\n}",

	// status: anything goes in, the last one wins
	"DIR {\n\tstatus\n}",
	"DIR {\n\tstatus 404\n}",
	"DIR {\n\tstatus abc\n}",
	"DIR {\n\tstatus 99\n}",
	"DIR {\n\tstatus 1000\n}",
	"DIR {\n\tstatus -1\n}",
	"DIR {\n\tstatus {http.vars.code}\n}",
	"DIR {\n\tstatus 404 500\n}",
	"DIR {\n\tstatus 200\n\tstatus 404\n}",
	"DIR {\n\tstatus 404 pass_thru\n}",

	// flags
	"DIR {\n\tdisable_canonical_uris\n}",
	"DIR {\n\tdisable_canonical_uris yes\n}",
	"DIR {\n\tdisable_canonical_uris\n\tdisable_canonical_uris\n}",
	"DIR {\n\tpass_thru\n}",
	"DIR {\n\tpass_thru yes\n}",
	"DIR {\n\tpass_thru\n\tpass_thru\n}",

	// etag_file_extensions: the last one wins
	"DIR {\n\tetag_file_extensions\n}",
	"DIR {\n\tetag_file_extensions .etag .sha\n}",
	"DIR {\n\tetag_file_extensions .a\n\tetag_file_extensions .b\n}",

	// everything at once
	"DIR /pub/* browse {\n\tfs myfs\n\troot /srv\n\thide .git\n\tindex index.htm\n\tprecompressed br gzip\n\tstatus 203\n\tdisable_canonical_uris\n\tpass_thru\n\tetag_file_extensions .etag\n\thide *.bak\n}",
}

// TestParityCaddyfile adapts each snippet with file_server and with
// h2_file_server, and provisions what the adapter made.
func TestParityCaddyfile(t *testing.T) {
	for _, snippet := range parityCaddyfiles {
		t.Run(strings.NewReplacer("\n", " ", "\t", "").Replace(snippet), func(t *testing.T) {
			body := ":80 {\n" + snippet + "\n}\n"
			fsJSON, fsErr := parityAdapt(strings.ReplaceAll(body, "DIR", "file_server"))
			h2JSON, h2Err := parityAdapt(strings.ReplaceAll(body, "DIR", "h2_file_server"))
			if fsErr != nil || h2Err != nil {
				parityCompareErrors(t, "adapting", fsErr, h2Err)
				return
			}
			renamed := strings.ReplaceAll(string(h2JSON), `"h2_file_server"`, `"file_server"`)
			cfgCompareJSON(t, []byte(renamed), fsJSON)

			fsRaw, _ := json.Marshal(cfgOnlyHandler(t, fsJSON, "file_server"))
			h2Raw, _ := json.Marshal(cfgOnlyHandler(t, h2JSON, "h2_file_server"))
			parityCompareErrors(t, "provisioning", parityProvisionFileServer(t, fsRaw), parityProvisionH2(t, h2Raw))
		})
	}
}

// parityJSON are handler configs, without "handler".
var parityJSON = []string{
	`{}`,
	`{"status_code": "abc"}`,
	`{"status_code": 99}`,
	`{"status_code": 1000}`,
	`{"status_code": "99"}`,
	`{"status_code": -5}`,
	`{"status_code": "{http.vars.code}"}`,
	`{"status_code": 404}`,
	`{"browse": {"file_limit": -1}}`,
	`{"browse": {"file_limit": 0}}`,
	`{"browse": {"sort": []}}`,
	`{"browse": {"sort": ["bogus"]}}`,
	`{"browse": {"sort": ["size", "sideways"]}}`,
	`{"browse": {"sort": ["desc", "size"]}}`,
	`{"browse": {"sort": ["size", "asc", "name"]}}`,
	`{"precompressed": {"bogus": {}}}`,
	`{"precompressed": {"gzip": {"bogus_field": 5}}}`,
	`{"precompressed": {"gzip": {}}, "precompressed_order": ["gzip", "gzip"]}`,
	`{"precompressed": {"gzip": {}}, "precompressed_order": ["br"]}`,
	`{"precompressed_order": ["gzip"]}`,
	`{"index_names": []}`,
	`{"hide": ["{http.vars.x}", "/a/b", "c"]}`,
	`{"etag_file_extensions": []}`,
	`{"canonical_uris": true}`,
}

// TestParityJSONProvision provisions each config as file_server and as
// h2_file_server.
func TestParityJSONProvision(t *testing.T) {
	for _, raw := range parityJSON {
		t.Run(raw, func(t *testing.T) {
			parityCompareErrors(t, "provisioning",
				parityProvisionFileServer(t, []byte(raw)), parityProvisionH2(t, []byte(raw)))
		})
	}
}

// parityAdapt adapts a Caddyfile.
func parityAdapt(body string) ([]byte, error) {
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(body), nil)
	return out, err
}

// parityCompareErrors fails unless both errors are nil, or both are set
// with the same text once the directive is named the same.
func parityCompareErrors(t *testing.T, what string, fsErr, h2Err error) {
	t.Helper()
	switch {
	case fsErr == nil && h2Err == nil:
	case fsErr == nil:
		t.Errorf("%s: file_server accepts, h2_file_server rejects: %v", what, h2Err)
	case h2Err == nil:
		t.Errorf("%s: file_server rejects (%v), h2_file_server accepts", what, fsErr)
	default:
		h2Text := strings.ReplaceAll(h2Err.Error(), "h2_file_server", "file_server")
		if h2Text != fsErr.Error() {
			t.Errorf("%s: errors differ\nfile_server:    %v\nh2_file_server: %v", what, fsErr, h2Err)
		}
	}
}

// parityProvisionFileServer strictly decodes a handler config (a
// "handler" field is dropped) into file_server and provisions it.
func parityProvisionFileServer(t *testing.T, raw []byte) error {
	t.Helper()
	fsrv := new(fileserver.FileServer)
	if err := cfgStrictDecode(cfgWithoutHandler(t, raw), fsrv); err != nil {
		t.Fatalf("decoding %s as file_server: %v", raw, err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return fsrv.Provision(ctx)
}

// parityProvisionH2 is parityProvisionFileServer for h2_file_server.
func parityProvisionH2(t *testing.T, raw []byte) error {
	t.Helper()
	h := new(Handler)
	if err := cfgStrictDecode(cfgWithoutHandler(t, raw), h); err != nil {
		t.Fatalf("decoding %s as h2_file_server: %v", raw, err)
	}
	return cfgProvision(t, h)
}
