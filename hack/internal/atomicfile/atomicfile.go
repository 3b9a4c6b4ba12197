package atomicfile

import (
	"io"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// Write writes path through a temporary file in its directory (so that
// the rename is atomic), creating the directory, with mode 0644 whatever
// the umask (so that the file is the same on every machine).
func Write(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := renameio.NewPendingFile(path, renameio.WithTempDir(filepath.Dir(path)), renameio.WithStaticPermissions(0o644))
	if err != nil {
		return err
	}
	defer func() { _ = f.Cleanup() }()
	if err := write(f); err != nil {
		return err
	}
	return f.CloseAtomicallyReplace()
}
