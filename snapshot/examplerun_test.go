package snapshot_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/emulator"
)

// examples are the examples of example_test.go, by name.
var examples = map[string]func(){
	"ExampleWriter_Write":  ExampleWriter_Write,
	"ExampleReader_Get":    ExampleReader_Get,
	"ExampleWriter_Repair": ExampleWriter_Repair,
}

// Each example prints what the "Prints:" comment that ends it says, as an
// Output comment would have it checked: it runs against the emulator, which
// `go test -short` does not start, so it cannot be a checked example.
func TestExamples(t *testing.T) {
	want := examplePrints(t, "example_test.go")
	for name := range want {
		if examples[name] == nil {
			t.Errorf("%s is not in examples: add it so that TestExamples runs it", name)
		}
	}
	emulator.SkipShort(t)
	for name, run := range examples {
		t.Run(name, func(t *testing.T) {
			w, ok := want[name]
			if !ok {
				t.Fatalf("%s: no such example with a Prints comment in example_test.go", name)
			}
			if got := strings.TrimSpace(stdoutOf(t, run)); got != w {
				t.Errorf("%s printed\n%s\nwant\n%s", name, got, w)
			}
		})
	}
}

// examplePrints reads the Example functions of file and returns, by name,
// what the comment "Prints: …" closing each body says it prints, trimmed as
// an Output comment is.
func examplePrints(t *testing.T, file string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	prints := map[string]string{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || !strings.HasPrefix(fn.Name.Name, "Example") {
			continue
		}
		var last *ast.CommentGroup
		for _, c := range f.Comments {
			if c.Pos() > fn.Body.Lbrace && c.End() < fn.Body.Rbrace {
				last = c
			}
		}
		text, ok := "", last != nil
		if ok {
			text, ok = strings.CutPrefix(last.Text(), "Prints:")
		}
		if !ok {
			t.Errorf("%s: its body does not end with a Prints comment", fn.Name.Name)
			continue
		}
		prints[fn.Name.Name] = strings.TrimSpace(text)
	}
	return prints
}

// stdoutOf runs f and returns what it wrote to os.Stdout, as go test
// captures an example's output.
func stdoutOf(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = stdout }()
	read := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		read <- string(b)
	}()
	f()
	_ = w.Close()
	defer r.Close()
	return <-read
}
