package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNoTemplateExecution keeps text/template out of the binary built the
// way the README and the Dockerfile build it: executing a template calls
// reflect.Value.MethodByName, and the linker then keeps every exported
// method of every type in the binary (89 MB instead of 61 MB).
func TestNoTemplateExecution(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no go command to list the binary's packages")
		}
		t.Skip("no go command to list the binary's packages")
	}
	out, err := exec.Command(gobin, "list", "-tags", "grpcnotrace", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "text/template" || p == "html/template" {
			t.Errorf("cmd/tollgate links %s: the linker then keeps every exported method (see BENCHMARKS.md, Binary size)", p)
		}
	}
}
