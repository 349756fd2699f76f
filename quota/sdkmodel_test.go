package quota

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ecs"
)

// sdkOperations lists the operations of an AWS SDK client: its methods of
// the form Op(ctx, *OpInput, ...func(*Options)) (*OpOutput, error).
func sdkOperations(client any) []string {
	ctxType := reflect.TypeFor[context.Context]()
	var ops []string
	ty := reflect.TypeOf(client)
	for m := range ty.Methods() {
		ft := m.Type // receiver first
		if ft.NumIn() != 4 || ft.NumOut() != 2 || ft.In(1) != ctxType || !ft.IsVariadic() {
			continue
		}
		in, out := ft.In(2), ft.Out(0)
		if in.Kind() != reflect.Pointer || in.Elem().Name() != m.Name+"Input" || out.Kind() != reflect.Pointer || out.Elem().Name() != m.Name+"Output" {
			continue
		}
		ops = append(ops, m.Name)
	}
	slices.Sort(ops)
	return ops
}

// TestECSPresetKnowsEveryOperationOfTheSDK compares the ecs preset with
// the ECS SDK model in go.mod: a new operation (after `go get -u`) fails
// here, naming it, rather than reaching a user as UnknownOperation.
func TestECSPresetKnowsEveryOperationOfTheSDK(t *testing.T) {
	s, err := Preset("ecs")
	if err != nil {
		t.Fatal(err)
	}
	ops := sdkOperations(&ecs.Client{})
	if len(ops) < 77 { // botocore's model had 77 when this was written
		t.Fatalf("found %d operations on ecs.Client; the reflection no longer sees them: %v", len(ops), ops)
	}
	listed := map[string]bool{}
	for _, c := range s.Categories {
		for _, a := range c.Actions {
			listed[a] = true
		}
	}
	for _, op := range ops {
		if !listed[op] {
			t.Errorf("the SDK's operation %s is in no category of the ecs preset (add it to ecsCategories from AWS's throttling page, or to ecsInferred saying why)", op)
		}
		delete(listed, op)
	}
	for a := range listed {
		t.Errorf("the ecs preset lists %s, which the SDK model does not have", a)
	}
	// The seed's spelling still resolves, to the SDK's.
	if c, ok := s.CategoryOf("UpdateContainerInstancesStates"); !ok || c.Name != "cluster-resource-modify" {
		t.Errorf("alias UpdateContainerInstancesStates → %v %v", c, ok)
	}
	if got := s.Canonical("UpdateContainerInstancesStates"); got != "UpdateContainerInstancesState" {
		t.Errorf("Canonical = %q", got)
	}
	// An operation newer than the table: refused by CategoryOf, charged
	// to the default category by CategoryOrDefault.
	if _, ok := s.CategoryOf("StartTheFutureOperation"); ok {
		t.Error("CategoryOf knows an operation no table lists")
	}
	if c, ok := s.CategoryOrDefault("StartTheFutureOperation"); !ok || c.Name != ECSUnlisted {
		t.Errorf("CategoryOrDefault = %v %v, want %s", c, ok, ECSUnlisted)
	}
}

func TestPresetsNameTheirSource(t *testing.T) {
	for _, name := range PresetNames() {
		s, _ := Preset(name)
		if s.Source == "" && name != "servicequotas" {
			t.Errorf("preset %s names no source", name)
		}
		if s.Source != "" && !strings.Contains(s.Source, "https://docs.aws.amazon.com/") {
			t.Errorf("preset %s: source %q is not an AWS documentation page", name, s.Source)
		}
	}
	c := Builtin()
	if len(c.Services()) != len(PresetNames()) {
		t.Fatalf("Builtin has %d services, want %d", len(c.Services()), len(PresetNames()))
	}
}
