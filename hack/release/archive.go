package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// archiveEntry is a file of a CLI archive.
type archiveEntry struct {
	Name   string // in the archive
	Source string // on disk
	Mode   int64
}

// writeArchive writes entries as a gzip-compressed tar archive whose
// bytes depend on the entries' contents alone: every time is epoch,
// owners are root without names, and gzip's header carries no time or
// name.
func writeArchive(w io.Writer, entries []archiveEntry, epoch time.Time) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		data, err := os.ReadFile(e.Source)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(fixedHeader(e.Name, e.Mode, int64(len(data)), epoch)); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func fixedHeader(name string, mode, size int64, epoch time.Time) *tar.Header {
	return &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     mode,
		Size:     size,
		ModTime:  epoch,
		Format:   tar.FormatPAX,
	}
}

// repackChart rewrites the archive helm package wrote with every entry's
// time set to epoch: helm stamps each with the time of packaging
// (chartutil's writeToTar), so two packagings of one chart differ. The
// entries, their order and their contents stay helm's.
func repackChart(w io.Writer, tgz []byte, epoch time.Time) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	err = eachTarEntry(tgz, func(name string, data []byte) error {
		if err := tw.WriteHeader(fixedHeader(name, 0o644, int64(len(data)), epoch)); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// eachTarEntry calls f with every regular file of a gzip-compressed tar
// archive, in the archive's order.
func eachTarEntry(tgz []byte, f func(name string, data []byte) error) error {
	return eachTarEntryOf(bytes.NewReader(tgz), true, f)
}

// maxEntry bounds one entry read into memory: a chart's files are small.
const maxEntry = 16 << 20

func eachTarEntryOf(r io.Reader, gzipped bool, f func(name string, data []byte) error) error {
	if gzipped {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		defer zr.Close()
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeReg:
		case tar.TypeDir:
			continue
		default:
			return fmt.Errorf("%s: not a regular file or directory (type %q)", h.Name, h.Typeflag)
		}
		if h.Size > maxEntry {
			return fmt.Errorf("%s: %d bytes, more than the %d an entry may have here", h.Name, h.Size, maxEntry)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := f(h.Name, data); err != nil {
			return err
		}
	}
}
