package sandbox

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock is driven with raw system calls through x/sys/unix rather than
// a library: go-landlock applies rulesets to all threads through psx,
// which Gatehouse cannot use (cgo, race detector); here only the
// trampoline's one thread is restricted, and it then executes the
// program.

// Filesystem rights by the ABI that introduced them.
const (
	fsRightsABI1 = unix.LANDLOCK_ACCESS_FS_EXECUTE |
		unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR |
		unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	abiRefer = 2

	// Rights granted by rules.
	rightsReadFile = unix.LANDLOCK_ACCESS_FS_READ_FILE
	rightsReadDir  = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	rightsExec     = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_EXECUTE
	// fileRights are those a rule on a file (not a directory) may hold.
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// handledFS is every filesystem right the ABI knows: each is denied unless
// a rule grants it. Rights of ABIs newer than this package (8 and later)
// are not handled, so not denied.
func handledFS(abi int) uint64 {
	r := uint64(fsRightsABI1)
	if abi >= abiRefer {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= abiTruncate {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= abiIoctlDev {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

// landlockABI asks the kernel for its Landlock ABI version.
func landlockABI() (int, string) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch errno {
	case 0:
		return int(v), ""
	case unix.ENOSYS:
		return 0, "the kernel has no Landlock (CONFIG_SECURITY_LANDLOCK) or a seccomp profile refuses its system calls"
	case unix.EOPNOTSUPP:
		return 0, "Landlock is built in but not enabled (boot with lsm=...,landlock)"
	case unix.EPERM:
		return 0, "a seccomp profile refuses Landlock's system calls"
	default:
		return 0, "probing Landlock: " + errno.Error()
	}
}

// landlockRule is one path-beneath rule.
type landlockRule struct {
	path   string
	access uint64
}

// restrictLandlock confines the calling thread (and what it executes):
// every handled access is denied except what rules grant; with ABI 4 TCP
// bind and connect are denied (no port rule); with ABI 6 signals and
// abstract Unix sockets cannot reach outside the domain. The caller has set
// no_new_privs. Paths are opened
// O_PATH here, after the parent checked they exist; one that vanished in
// between is skipped (nothing to allow there).
func restrictLandlock(abi int, rules []landlockRule) error {
	attr := unix.LandlockRulesetAttr{Access_fs: handledFS(abi)}
	if abi >= abiNet {
		attr.Access_net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if abi >= abiScope {
		attr.Scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	// The kernel accepts the larger struct from an older ABI as long as
	// the fields it does not know are zero.
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("creating the Landlock ruleset: %w", errno)
	}
	ruleset := int(fd)
	defer unix.Close(ruleset)

	for _, r := range rules {
		if err := addPathRule(ruleset, r, attr.Access_fs); err != nil {
			return err
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return fmt.Errorf("applying the Landlock ruleset: %w", errno)
	}
	return nil
}

func addPathRule(ruleset int, r landlockRule, handled uint64) error {
	fd, err := unix.Open(r.path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %s for a Landlock rule: %w", r.path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", r.path, err)
	}
	access := r.access & handled
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= fileRights
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("adding a Landlock rule for %s: %w", r.path, errno)
	}
	return nil
}
