package h2file

import (
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestCaddyfileErrors checks the Caddyfile errors of file_server's
// subdirectives: h2_file_server gives exactly file_server's error, which
// names what is wrong and the line it is on.
func TestCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		// every string must be in the error message
		want []string
		// the line the error must point to
		line int
	}{
		// unknown tokens
		{name: "unknown subdirective", input: "h2_file_server {\n\tbogus\n}", want: []string{"unknown subdirective 'bogus'"}, line: 2},
		{name: "unknown subdirective with args", input: "h2_file_server {\n\troot /srv\n\tbrowze on\n}", want: []string{"unknown subdirective 'browze'"}, line: 3},
		{name: "unknown subdirective in browse block", input: "h2_file_server {\n\tbrowse {\n\t\tbogus\n\t}\n}", want: []string{"unknown subdirective 'bogus'"}, line: 3},
		{name: "inline argument other than browse", input: "h2_file_server listing", want: []string{"wrong argument count", "'listing'"}, line: 1},
		{name: "two inline arguments", input: "h2_file_server browse browse", want: []string{"wrong argument count"}, line: 1},

		// missing arguments
		{name: "fs without arg", input: "h2_file_server {\n\tfs\n}", want: []string{"wrong argument count", "'fs'"}, line: 2},
		{name: "root without arg", input: "h2_file_server {\n\troot\n}", want: []string{"wrong argument count", "'root'"}, line: 2},
		{name: "hide without arg", input: "h2_file_server {\n\thide\n}", want: []string{"wrong argument count", "'hide'"}, line: 2},
		{name: "index without arg", input: "h2_file_server {\n\tindex\n}", want: []string{"wrong argument count", "'index'"}, line: 2},
		{name: "status without arg", input: "h2_file_server {\n\tstatus\n}", want: []string{"wrong argument count", "'status'"}, line: 2},
		{name: "etag_file_extensions without arg", input: "h2_file_server {\n\tetag_file_extensions\n}", want: []string{"wrong argument count", "'etag_file_extensions'"}, line: 2},
		{name: "file_limit without arg", input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit\n\t}\n}", want: []string{"file_limit should have an integer value"}, line: 3},
		{name: "plain_time_format without arg", input: "h2_file_server {\n\tbrowse {\n\t\tplain_time_format\n\t}\n}", want: []string{"plain_time_format is missing a time layout argument"}, line: 3},
		{name: "plain_time_format empty arg", input: "h2_file_server {\n\tbrowse {\n\t\tplain_time_format \"\"\n\t}\n}", want: []string{"plain_time_format requires a non-empty time layout argument"}, line: 3},
		{name: "root with a block instead of an arg", input: "h2_file_server {\n\troot {\n\t}\n}", want: []string{"wrong argument count", "'root'"}, line: 2},

		// a token left on a line is read as the next subdirective
		{name: "fs extra arg", input: "h2_file_server {\n\tfs a b\n}", want: []string{"unknown subdirective 'b'"}, line: 2},
		{name: "root extra arg", input: "h2_file_server {\n\troot /a /b\n}", want: []string{"unknown subdirective '/b'"}, line: 2},
		{name: "status extra arg", input: "h2_file_server {\n\tstatus 404 500\n}", want: []string{"unknown subdirective '500'"}, line: 2},
		{name: "browse extra arg", input: "h2_file_server {\n\tbrowse a.html b.html\n}", want: []string{"unknown subdirective 'b.html'"}, line: 2},
		{name: "reveal_symlinks extra arg", input: "h2_file_server {\n\tbrowse {\n\t\treveal_symlinks yes\n\t}\n}", want: []string{"unknown subdirective 'yes'"}, line: 3},
		{name: "disable_canonical_uris extra arg", input: "h2_file_server {\n\tdisable_canonical_uris yes\n}", want: []string{"wrong argument count", "'yes'"}, line: 2},
		{name: "pass_thru extra arg", input: "h2_file_server {\n\tpass_thru yes\n}", want: []string{"wrong argument count", "'yes'"}, line: 2},
		{name: "file_limit extra arg", input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit 1 2\n\t}\n}", want: []string{"file_limit should have an integer value"}, line: 3},
		{name: "plain_time_format extra arg", input: "h2_file_server {\n\tbrowse {\n\t\tplain_time_format 2006 01\n\t}\n}", want: []string{"plain_time_format accepts exactly one time layout argument"}, line: 3},

		// given twice, where file_server refuses it
		{name: "fs twice", input: "h2_file_server {\n\tfs a\n\tfs b\n}", want: []string{"file system already specified"}, line: 3},
		{name: "browse twice", input: "h2_file_server {\n\tbrowse\n\tbrowse\n}", want: []string{"browsing is already configured"}, line: 3},
		{name: "browse inline and as block", input: "h2_file_server browse {\n\tbrowse {\n\t\tfile_limit 3\n\t}\n}", want: []string{"browsing is already configured"}, line: 2},
		{name: "reveal_symlinks twice", input: "h2_file_server {\n\tbrowse {\n\t\treveal_symlinks\n\t\treveal_symlinks\n\t}\n}", want: []string{"Symlinks path reveal is already enabled"}, line: 4},
		{name: "file_limit twice", input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit 1\n\t\tfile_limit 2\n\t}\n}", want: []string{"file_limit is already enabled"}, line: 4},
		{name: "file_limit 5 then 0", input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit 5\n\t\tfile_limit 0\n\t}\n}", want: []string{"file_limit is already enabled"}, line: 4},
		{name: "plain_time_format twice", input: "h2_file_server {\n\tbrowse {\n\t\tplain_time_format 2006\n\t\tplain_time_format 01\n\t}\n}", want: []string{"plain_time_format is already set"}, line: 4},

		// bad values
		{name: "unknown precompressed format", input: "h2_file_server {\n\tprecompressed br bogus\n}", want: []string{"http.precompressed.bogus"}, line: 2},
		{name: "bad browse sort option", input: "h2_file_server {\n\tbrowse {\n\t\tsort size upwards\n\t}\n}", want: []string{"unknown sort option 'upwards'"}, line: 3},
		{name: "bad file_limit", input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit many\n\t}\n}", want: []string{"file_limit should have an integer value"}, line: 3},
		{name: "fractional file_limit", input: "h2_file_server {\n\tbrowse {\n\t\tfile_limit 1.5\n\t}\n}", want: []string{"file_limit should have an integer value"}, line: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cfgParse(tc.input)
			checkCaddyfileError(t, tc.input, err, tc.want, tc.line)
			_, fsErr := cfgParseFileServer(tc.input)
			if fsErr == nil {
				t.Fatalf("file_server accepts what h2_file_server rejects:\n%s", tc.input)
			}
			if got := strings.ReplaceAll(err.Error(), "h2_file_server", "file_server"); got != fsErr.Error() {
				t.Errorf("error differs from file_server's\nh2_file_server: %v\nfile_server:    %v", err, fsErr)
			}
		})
	}
}

// TestCaddyfileOwnOptionErrors checks the Caddyfile errors of h2file's
// own options (those of h2_file_server that file_server has not, and the
// h2_engine and coalesce listener wrappers): each names the option and
// what it accepts, and points to the line.
func TestCaddyfileOwnOptionErrors(t *testing.T) {
	parsers := map[string]func(*caddyfile.Dispenser) error{
		"h2_file_server": func(d *caddyfile.Dispenser) error { return new(Handler).UnmarshalCaddyfile(d) },
		"h2_engine":      func(d *caddyfile.Dispenser) error { return new(EngineWrapper).UnmarshalCaddyfile(d) },
		"coalesce":       func(d *caddyfile.Dispenser) error { return new(CoalesceWrapper).UnmarshalCaddyfile(d) },
	}
	for _, tc := range []struct {
		name  string
		input string
		want  []string // every string must be in the error message
		line  int      // the line the error must point to
	}{
		// h2_file_server's write_chunk and cache
		{name: "write_chunk not a size", input: "h2_file_server {\n\twrite_chunk big\n}",
			want: []string{"bad write_chunk 'big'", "a byte size such as 4096, 64KiB or 1MB", "from 1 byte to 16 MiB", "the default, 16375 bytes"}, line: 2},
		{name: "cache on", input: "h2_file_server {\n\tcache on\n}", want: []string{"unrecognized cache argument 'on' (want 'off' or a block)"}, line: 2},
		{name: "cache unknown option", input: "h2_file_server {\n\tcache {\n\t\tmax_size 1\n\t}\n}",
			want: []string{"unrecognized cache option 'max_size'", "max_files, max_memory, small_file_max, revalidate or inactive"}, line: 3},
		{name: "cache max_files not a number", input: "h2_file_server {\n\tcache {\n\t\tmax_files many\n\t}\n}",
			want: []string{"bad cache max_files 'many'", "a whole number of at least 1", "the default, 4096"}, line: 3},
		{name: "cache max_memory not a size", input: "h2_file_server {\n\tcache {\n\t\tmax_memory lots\n\t}\n}",
			want: []string{"bad cache max_memory 'lots'", "a byte size such as 4096, 64KiB or 1MB", "or off", "the default, 64 MiB"}, line: 3},
		{name: "cache small_file_max zero", input: "h2_file_server {\n\tcache {\n\t\tsmall_file_max 0\n\t}\n}",
			want: []string{"bad cache small_file_max '0'", "at least 1 byte", "the default, 256 KiB"}, line: 3},
		{name: "cache revalidate not a duration", input: "h2_file_server {\n\tcache {\n\t\trevalidate forever\n\t}\n}",
			want: []string{"bad cache revalidate 'forever'", "a duration longer than 0, such as 500ms, 2s or 1m", "the default, 1s"}, line: 3},
		{name: "cache inactive zero", input: "h2_file_server {\n\tcache {\n\t\tinactive 0s\n\t}\n}",
			want: []string{"bad cache inactive '0s'", "a duration longer than 0"}, line: 3},

		// h2_file_server's compress
		{name: "compress unknown encoding", input: "h2_file_server {\n\tcompress foo\n}",
			want: []string{`compress: unknown encoding "foo"`, "accepted: the http.encoders modules of this build: gzip, zstd"}, line: 2},
		{name: "compress unknown encoding in block", input: "h2_file_server {\n\tcompress {\n\t\tfoo 3\n\t}\n}",
			want: []string{`compress: unknown encoding "foo"`, "gzip, zstd"}, line: 3},
		{name: "compress br", input: "h2_file_server {\n\tcompress gzip br\n}",
			want: []string{`compress: unknown encoding "br"`, "gzip, zstd", "brotli [<level>] on a line of its block"}, line: 2},
		{name: "compress gzip level not a number", input: "h2_file_server {\n\tcompress {\n\t\tgzip x\n\t}\n}",
			want: []string{"compress gzip: ", `"x"`, "gzip takes one level, a whole number from 1 (fastest) to 9 (smallest)"}, line: 3},
		{name: "compress zstd bad level", input: "h2_file_server {\n\tcompress {\n\t\tzstd fast\n\t}\n}",
			want: []string{"compress zstd: ", "'fastest', 'better', 'best', 'default'"}, line: 3},
		{name: "compress minimum_length not a number", input: "h2_file_server {\n\tcompress {\n\t\tminimum_length big\n\t}\n}",
			want: []string{"bad compress minimum_length 'big'", "a whole number of bytes, such as 512 (the default)"}, line: 3},
		{name: "compress minimum_length two values", input: "h2_file_server {\n\tcompress {\n\t\tminimum_length 1 2\n\t}\n}",
			want: []string{"compress minimum_length takes one length in bytes"}, line: 3},
		{name: "compress bad match", input: "h2_file_server {\n\tcompress {\n\t\tmatch {\n\t\t\tstatus abc\n\t\t}\n\t}\n}",
			want: []string{"compress: bad status value 'abc'"}, line: 4},
		{name: "compress max_memory not a size", input: "h2_file_server {\n\tcompress {\n\t\tmax_memory big\n\t}\n}",
			want: []string{"bad compress max_memory 'big'", "a byte size such as 4096, 64KiB or 1MB", "the default, 32 MiB"}, line: 3},
		{name: "compress max_file_size without size", input: "h2_file_server {\n\tcompress {\n\t\tmax_file_size\n\t}\n}",
			want: []string{"compress max_file_size takes one size, such as 32MiB"}, line: 3},
		{name: "compress brotli level", input: "h2_file_server {\n\tcompress {\n\t\tbrotli 12\n\t}\n}",
			want: []string{"compress brotli takes one level, 1 to 11: '12'", "the default, 6"}, line: 3},
		{name: "compress brotli level 0", input: "h2_file_server {\n\tcompress {\n\t\tbrotli 0\n\t}\n}",
			want: []string{"compress brotli takes one level, 1 to 11: '0'", "the default, 6"}, line: 3},

		// h2_engine
		{name: "send_timeout not a duration", input: "h2_engine {\n\tsend_timeout forever\n}",
			want: []string{"bad send_timeout 'forever'", "a duration such as 30s or 2m", "a negative value, e.g. -1s, turns it off", "the default, 1m"}, line: 2},
		{name: "send_timeout 0", input: "h2_engine {\n\tsend_timeout 0\n}",
			want: []string{"bad send_timeout '0'", "leave it out for the default, 1m"}, line: 2},
		{name: "send_timeout twice", input: "h2_engine {\n\tsend_timeout 1s\n\tsend_timeout 2s\n}", want: []string{"send_timeout already specified"}, line: 3},
		{name: "engine unknown option", input: "h2_engine {\n\tmax_streams 10\n}", want: []string{"unrecognized subdirective 'max_streams'", "accepted: send_timeout"}, line: 2},

		// coalesce
		{name: "max_pending not a size", input: "coalesce {\n\tmax_pending lots\n}",
			want: []string{"bad max_pending 'lots'", "a byte size such as 4096, 64KiB or 1MB", "from 1 byte to 1GiB", "the default, 64 KiB"}, line: 2},
		{name: "max_total negative", input: "coalesce {\n\tmax_total -1MiB\n}",
			want: []string{"bad max_total '-1MiB'", "from 1 byte to 1TiB", "the default, 64 MiB"}, line: 2},
		{name: "max_pending out of range", input: "coalesce {\n\tmax_pending 2GiB\n}",
			want: []string{"max_pending out of range: 2GiB (must be between 1 byte and 1GiB)", "the default (64 KiB"}, line: 2},
		{name: "close_timeout not a duration", input: "coalesce {\n\tclose_timeout soon\n}",
			want: []string{"bad close_timeout 'soon'", "a duration longer than 0, such as 500ms, 5s or 1m", "the default, 5s"}, line: 2},
		{name: "close_timeout zero", input: "coalesce {\n\tclose_timeout 0s\n}", want: []string{"bad close_timeout '0s'", "longer than 0"}, line: 2},
		{name: "coalesce unknown option", input: "coalesce {\n\tmax_buffer 1MiB\n}",
			want: []string{"unrecognized subdirective 'max_buffer'", "accepted: max_pending, max_total, close_timeout"}, line: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			directive, _, _ := strings.Cut(tc.input, " ")
			err := parsers[directive](caddyfile.NewTestDispenser(tc.input))
			checkCaddyfileError(t, tc.input, err, tc.want, tc.line)
			t.Log(err)
		})
	}
}

// checkCaddyfileError requires err, the error of parsing input, to
// contain every string of want and to point to line.
func checkCaddyfileError(t *testing.T, input string, err error, want []string, line int) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted:\n%s", input)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if w := ", at Testfile:" + strconv.Itoa(line); !strings.HasSuffix(err.Error(), w) {
		t.Errorf("error %q does not point to line %d", err, line)
	}
}
