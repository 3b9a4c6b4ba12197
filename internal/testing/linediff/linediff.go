package linediff

import (
	"fmt"
	"strings"
)

// First is the first line where a and b differ, with its number and each
// side's line under its name, or "(none)".
func First(nameA, a, nameB, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	width := max(len(nameA), len(nameB)) + 1
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  %-*s %s\n  %-*s %s", i+1, width, nameA+":", x, width, nameB+":", y)
		}
	}
	return "(none)"
}
