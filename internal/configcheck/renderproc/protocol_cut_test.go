package renderproc

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestErrorTextsAreCutOnCharacterBoundaries: an absurdly long error
// message from a worker is cut to the answer's limit whole characters at a
// time: it becomes a denial a user reads.
func TestErrorTextsAreCutOnCharacterBoundaries(t *testing.T) {
	we := toWireError(errors.New(strings.Repeat("ü", 5000)), 4096)
	if !utf8.Valid(we.Text) || !strings.HasSuffix(string(we.Text), "ü"+truncatedSuffix) || int64(len(we.Text)) > 4096 {
		t.Fatalf("cut text: %d bytes, valid UTF-8 %v, ends %q", len(we.Text), utf8.Valid(we.Text), we.Text[len(we.Text)-20:])
	}
}
