// jsoncanon reads one JSON value from standard input and writes it to
// standard output with object keys sorted and tab indentation, numbers
// kept as written, so that two JSON documents are equal exactly when
// their canonical forms are (.ci/refdocs compares them with diff).
//
// Usage: go build -o jsoncanon .ci/jsoncanon.go; jsoncanon <in.json >out.json
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

func main() {
	dec := json.NewDecoder(os.Stdin)
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		fail(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		fail(fmt.Errorf("more than one JSON value"))
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "\t")
	if err := enc.Encode(v); err != nil {
		fail(err)
	}
	os.Stdout.Write(out.Bytes())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "jsoncanon:", err)
	os.Exit(1)
}
