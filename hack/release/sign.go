package main

import (
	"errors"
	"flag"
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

// signing is who signs a release: a key pair (make release's RELEASE_KEY,
// the signatures kept out of Sigstore's public log), or keyless, the
// release workflow's OIDC identity certified by Sigstore's Fulcio and
// recorded in its Rekor log, which verification then demands. Neither:
// nothing is signed.
type signing struct {
	Key string // cosign's private key
	// Identity and Issuer are a keyless signer's certificate identity
	// (the workflow's URI at its ref) and OIDC issuer, as a verifier
	// names them.
	Identity, Issuer string
}

// addFlags adds the signer's flags to fs; unsigned says what happens when
// none is given.
func (s *signing) addFlags(fs *flag.FlagSet, unsigned string) {
	fs.StringVar(&s.Key, "key", "", "cosign's private key (COSIGN_PASSWORD unlocks it), the same for make release and make publish; empty, and not keyless: "+unsigned+".")
	fs.StringVar(&s.Identity, "keyless-identity", "", "Sign keyless instead (cosign's ambient OIDC token: the release workflow's), the same for make release and make publish: the certificate identity verifiers demand, the workflow's URI at its ref.")
	fs.StringVar(&s.Issuer, "keyless-issuer", "", "The keyless signer's OIDC issuer, which verifiers demand (https://token.actions.githubusercontent.com).")
}

func (s signing) keyless() bool { return s.Identity != "" }

func (s signing) enabled() bool { return s.Key != "" || s.keyless() }

func (s signing) validate() error {
	switch {
	case s.Key != "" && s.keyless():
		return errors.New("--key and --keyless-identity both given: sign one way")
	case s.keyless() && s.Issuer == "":
		return errors.New("--keyless-identity needs --keyless-issuer (https://token.actions.githubusercontent.com in GitHub Actions)")
	case !s.keyless() && s.Issuer != "":
		return errors.New("--keyless-issuer without --keyless-identity")
	}
	return nil
}

// signArgs name the signer to cosign sign, attest and sign-blob: the key,
// or nothing (keyless: cosign takes the ambient OIDC token).
func (s signing) signArgs() []string {
	if s.keyless() {
		return nil
	}
	return []string{"--key", s.Key}
}

// logArgs say whether signatures go to the transparency log: a keyless
// certificate outlives its ten minutes only through the log's timestamp,
// so keyless always logs; a key logs only when asked (tlog).
func (s signing) logArgs(tlog bool) []string {
	if s.keyless() {
		return nil
	}
	return []string{"--tlog-upload=" + fmt.Sprint(tlog)}
}

// verifyArgs are cosign verify's flags for what s signed in dir: the
// release's public key (without the log unless it was used), or the
// keyless identity and issuer, nothing else accepted.
func (s signing) verifyArgs(dir string, n names, tlog bool) []string {
	if s.keyless() {
		return []string{"--certificate-identity", s.Identity, "--certificate-oidc-issuer", s.Issuer}
	}
	args := []string{"--key", filepath.Join(dir, n.PublicKey())}
	if !tlog {
		args = append(args, "--insecure-ignore-tlog")
	}
	return args
}

// signChecksums signs checksums.txt (cosign sign-blob): with a key, the
// signature beside it and the public key written next to them; keyless,
// a Sigstore bundle (signature, certificate, log entry). It then verifies
// the signature as a user would.
func signChecksums(binary string, s signing, dir string, n names) error {
	sums := filepath.Join(dir, n.Checksums())
	if s.keyless() {
		if _, err := cosign(binary, "sign-blob", "--yes", "--bundle", filepath.Join(dir, n.Bundle()), sums); err != nil {
			return err
		}
		return verifyChecksums(binary, s, dir, n)
	}
	if _, err := cosign(binary, "sign-blob", "--yes", "--key", s.Key, "--tlog-upload=false", "--output-signature", filepath.Join(dir, n.Signature()), sums); err != nil {
		return err
	}
	out, err := cosign(binary, "public-key", "--key", s.Key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, n.PublicKey()), []byte(out), 0o644); err != nil {
		return err
	}
	return verifyChecksums(binary, s, dir, n)
}

// verifyChecksums checks checksums.txt's signature: keyless, by its
// bundle and the signer's identity; otherwise (s's key unused) by the
// release's public key.
func verifyChecksums(binary string, s signing, dir string, n names) error {
	sums := filepath.Join(dir, n.Checksums())
	if s.keyless() {
		_, err := cosign(binary, append(append([]string{"verify-blob", "--bundle", filepath.Join(dir, n.Bundle())}, s.verifyArgs(dir, n, true)...), sums)...)
		return err
	}
	_, err := cosign(binary, "verify-blob", "--key", filepath.Join(dir, n.PublicKey()), "--insecure-ignore-tlog",
		"--signature", filepath.Join(dir, n.Signature()), sums)
	return err
}
