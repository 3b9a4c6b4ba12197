package configcheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// TestLuaAttacksAtEveryLandlockLevel plays a config author on a platform
// that allows Lua (--configcheck-allow-lua), at the Landlock levels nodes
// run (simulated: sandbox.LimitLandlockABI): the config's Lua, run by the
// confined haproxy -c of its embedded test, tries to read /etc/passwd into
// the test's failure message, to write a file outside its directory and to
// start a shell. At ABI 1, 4 and 6 each is refused while haproxy runs
// (Landlock for the files, seccomp for the process); without Landlock the
// config is refused before anything runs, since only Landlock confines
// files and Lua is how a config would read them.
func TestLuaAttacksAtEveryLandlockLevel(t *testing.T) {
	t.Cleanup(func() { sandbox.LimitLandlockABI(-1) })
	marker := filepath.Join(os.TempDir(), "gatehouse-lua-level-"+fmt.Sprint(os.Getpid()))
	t.Cleanup(func() { _ = os.Remove(marker); _ = os.Remove(marker + "-exec") })
	data, err := os.ReadFile("testdata/lua-attack.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config := strings.ReplaceAll(string(data), "MARKER", marker)
	for _, level := range []int{0, 1, 4, 6} {
		t.Run(fmt.Sprintf("landlock-abi-%d", level), func(t *testing.T) {
			sandbox.LimitLandlockABI(level)
			report, err := RunOffline(context.Background(), []byte(config), OfflineOptions{AllowLua: true})
			if level == 0 {
				if err == nil || !strings.Contains(err.Error(), "this kernel has no Landlock") {
					t.Fatalf("Lua allowed without Landlock: %v (report %+v); want the config refused before anything runs", err, report)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			text := fmt.Sprintf("%+v", report)
			if strings.Contains(text, "READ:") || strings.Contains(text, "root:") || strings.Contains(text, "ENVIRON:") {
				t.Errorf("the config's Lua read /etc/passwd or the environment: %s", text)
			}
			// The Lua ends with an error of its own: its words in the
			// report show it ran, every attempt before it refused.
			if !strings.Contains(text, "LUA-RAN") {
				t.Errorf("the test's report does not show haproxy running the Lua (the attack means nothing): %s", text)
			}
			for _, path := range []string{marker, marker + "-exec"} {
				if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the config's Lua wrote %s (%v)", path, err)
				}
			}
		})
	}
}
