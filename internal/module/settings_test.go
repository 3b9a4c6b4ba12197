package module

import (
	"reflect"
	"testing"
)

func TestSplitList(t *testing.T) {
	for in, want := range map[string][]string{
		"":              {},
		" , ,":          {},
		"a":             {"a"},
		" a , b ,, c ,": {"a", "b", "c"},
	} {
		got := SplitList(in)
		if got == nil || !reflect.DeepEqual(got, want) {
			t.Errorf("SplitList(%q) = %#v, want %#v", in, got, want)
		}
	}
}
