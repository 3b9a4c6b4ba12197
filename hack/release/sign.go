package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// cosign runs the cosign binary with args and returns its standard
// output; its standard error is in the error when it fails. COSIGN_PASSWORD passes through (empty when unset, which
// is what a key made with an empty password wants).
func cosign(binary string, args ...string) (string, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = os.Environ()
	if _, ok := os.LookupEnv("COSIGN_PASSWORD"); !ok {
		cmd.Env = append(cmd.Env, "COSIGN_PASSWORD=")
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("cosign %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out), nil
}

// signChecksums signs checksums.txt with key (cosign sign-blob, no
// transparency log: a local release is verified by its public key alone),
// writes the public key beside it and verifies the signature as a user
// would.
func signChecksums(binary, key, dir string, n names) error {
	sums := filepath.Join(dir, n.Checksums())
	sig := filepath.Join(dir, n.Signature())
	pub := filepath.Join(dir, n.PublicKey())
	if _, err := cosign(binary, "sign-blob", "--yes", "--key", key, "--tlog-upload=false", "--output-signature", sig, sums); err != nil {
		return err
	}
	out, err := cosign(binary, "public-key", "--key", key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(pub, []byte(out), 0o644); err != nil {
		return err
	}
	return verifyChecksums(binary, dir, n)
}

// verifyChecksums checks checksums.txt's signature by the release's
// public key.
func verifyChecksums(binary, dir string, n names) error {
	_, err := cosign(binary, "verify-blob", "--key", filepath.Join(dir, n.PublicKey()), "--insecure-ignore-tlog",
		"--signature", filepath.Join(dir, n.Signature()), filepath.Join(dir, n.Checksums()))
	return err
}
