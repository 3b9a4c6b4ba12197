package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A confined program runs with no capability at all, whatever user
// Gatehouse runs as. Run as root (make run, a root Deployment), the
// trampoline holds every capability; Landlock and seccomp still apply,
// but CAP_NET_ADMIN configures the network over netlink, CAP_SYS_MODULE
// loads kernel code, CAP_SYS_ADMIN mounts over the host's directories
// where Landlock is missing, CAP_SYS_RESOURCE raises the limits set here.
//
// dropCapabilities empties all five sets of the calling thread, the one
// that executes the program:
//
//   - the bounding set (with CAP_SETPCAP; a process without it has none
//     to drop from permitted either), so that no later execve of a root
//     program can regain one;
//   - securebits that stop root from being special (SECBIT_NOROOT,
//     SECBIT_NO_SETUID_FIXUP, no ambient raising), locked;
//   - ambient, then inheritable, permitted and effective (capset).
//
// no_new_privs already stops execve from granting more than the thread
// holds; emptied sets make "what it holds" nothing. The result is read
// back: a set left non-empty is a setup failure, not a quieter confinement.
func dropCapabilities() error {
	last, err := lastCapability()
	if err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if data[0].Effective&(1<<unix.CAP_SETPCAP) != 0 {
		for c := 0; c <= last; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
			}
		}
		const bits = secbitNoRoot | secbitNoRootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
			secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLocked
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, bits, 0, 0, 0); err != nil {
			return fmt.Errorf("setting securebits: %w", err)
		}
	}
	// EINVAL: a kernel before ambient capabilities (4.3), which has none
	// to clear.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing the ambient capabilities: %w", err)
	}
	data = [2]unix.CapUserData{}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return verifyNoCapabilities(last)
}

// verifyNoCapabilities reads the sets back.
func verifyNoCapabilities(last int) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for i, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return fmt.Errorf("capabilities left after dropping them (word %d: effective %#x, permitted %#x, inheritable %#x)",
				i, d.Effective, d.Permitted, d.Inheritable)
		}
	}
	for c := 0; c <= last; c++ {
		if v, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0); err == nil && v != 0 {
			return fmt.Errorf("ambient capability %d left after dropping them", c)
		}
	}
	return nil
}

// Securebits (include/uapi/linux/securebits.h), which x/sys/unix does not
// define.
const (
	secbitNoRoot                  = 1 << 0
	secbitNoRootLocked            = 1 << 1
	secbitNoSetuidFixup           = 1 << 2
	secbitNoSetuidFixupLocked     = 1 << 3
	secbitKeepCapsLocked          = 1 << 5
	secbitNoCapAmbientRaise       = 1 << 6
	secbitNoCapAmbientRaiseLocked = 1 << 7
)

// lastCapability is the highest capability number the kernel knows.
func lastCapability() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		// Without /proc, every number this package knows; PR_CAPBSET_DROP
		// answers EINVAL for those the kernel does not.
		return unix.CAP_LAST_CAP, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("reading /proc/sys/kernel/cap_last_cap: %w", err)
	}
	return max(n, unix.CAP_LAST_CAP), nil
}
