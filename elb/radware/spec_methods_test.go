package radware

import (
	"maps"
	"slices"
	"testing"

	"github.com/lbfed/lbfed/lbspec"
)

// The front doors and servicelb accept exactly lbspec.Methods; each must have a group metric
// here, and no metric may be unreachable.
func TestMethodsMatchLBSpec(t *testing.T) {
	got := slices.Sorted(maps.Keys(methods))
	want := slices.Sorted(maps.Keys(lbspec.Methods))
	if !slices.Equal(got, want) {
		t.Fatalf("radware methods %v, lbspec.Methods %v", got, want)
	}
	for m := range lbspec.Methods {
		if methods[m] == 0 {
			t.Errorf("method %q has no group metric", m)
		}
	}
}
