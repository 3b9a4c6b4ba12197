package haproxy

import (
	"fmt"
	"strings"
)

// How haproxy 2.6 reads the files the policy reads as configuration
// (haproxy.cfg, SPOE configurations, crt-lists, lf-file payloads), read in
// its sources (v2.6.0):
//
//   - readcfgfile (src/cfgparse.c; flt_spoe.c calls it for SPOE) reads a
//     line with fgets into a buffer it doubles until the line fits, so a
//     line has no length limit. Its parser sees the line up to its first
//     NUL byte; the next fgets then stops the file ("Stray NUL character").
//   - crtlist_parse_file (src/ssl_crtlist.c) reads with fgets into a fixed
//     buffer of CRT_LINESIZE (65,536) bytes, so one read is at most 65,535
//     bytes. It skips a read whose first byte is '#', '\n' or '\r' before
//     looking for a NUL, and its "line too long" test measures the read with
//     strlen. A comment read that holds a NUL therefore hides whatever
//     follows the NUL up to the end of the 65,535 bytes, and the bytes after
//     that are read as the next line: "#", NUL, padding, then a path is a
//     certificate the parser stats while a reader stopping at the NUL sees
//     a comment. A read that starts with a NUL reaches crtlist_parse_line
//     with an empty string, which returns without setting the certificate
//     pointer the caller then tests (uninitialized: undefined behaviour).
//   - an lf-file (http_parse_http_reply, src/http_htx.c) is read whole and
//     parsed as one C string: up to its first NUL, line breaks included.
//
// The policy reads crt-lists exactly as crtlist_parse_file does
// (readCrtList), and on top refuses any NUL byte in a file it reads as
// configuration (RuleNoNUL) and any crt-list line haproxy's buffer cannot
// hold (RuleLineTooLong). So every file the policy accepts is read the same
// way by any of these readers (a line is the text between two '\n'), and
// nothing rests on undefined behaviour or on the details of one version's
// buffers. No real configuration contains a NUL byte or a 64 KiB
// certificate line; haproxy itself fails a check on most of them.

// crtListLineSize is CRT_LINESIZE (include/haproxy/defaults.h), the
// buffer crtlist_parse_file hands to fgets: one read is at most
// crtListLineSize-1 bytes, its '\n' included.
const crtListLineSize = 65536

// fileLine is one line of a file as haproxy's reader hands it to its parser.
type fileLine struct {
	// number is haproxy's line number: the reads counted.
	number int
	// text is what the parser sees: the read up to its first NUL byte,
	// without its '\n'.
	text string
	// undefined marks a read that starts with a NUL byte, which
	// crtlist_parse_line answers without setting the certificate path the
	// caller reads (undefined behaviour in haproxy).
	undefined bool
}

// crtListStop says why crtlist_parse_file stops before the end of a file.
type crtListStop int

const (
	crtListRead crtListStop = iota // read to the end
	// crtListTooLong: a read filled the buffer without a '\n' ("line too
	// long, limit is 65535 characters").
	crtListTooLong
	// crtListStrayNUL: the read after one cut short by a NUL ("Stray NUL
	// character at position N").
	crtListStrayNUL
)

// crtListFile is a crt-list as crtlist_parse_file reads it.
type crtListFile struct {
	// lines are the reads crtlist_parse_line parses, in order: comments
	// and empty lines are left out.
	lines []fileLine
	stop  crtListStop
	// stopLine is the line number haproxy's error names.
	stopLine int
	// missingLF: the file was read to its end, and its last line has no
	// '\n' (haproxy then refuses the file after reading it: "Missing LF
	// on last line").
	missingLF bool
}

// readCrtList reads content as crtlist_parse_file does (see above).
func readCrtList(content string) crtListFile {
	var f crtListFile
	number := 0
	truncated := false // missing_lf != -1
	for pos := 0; pos < len(content); {
		// fgets: through the first '\n', at most crtListLineSize-1 bytes.
		read := content[pos:min(len(content), pos+crtListLineSize-1)]
		if i := strings.IndexByte(read, '\n'); i >= 0 {
			read = read[:i+1]
		}
		pos += len(read)
		if truncated {
			f.stop, f.stopLine = crtListStrayNUL, number
			return f
		}
		number++
		text := cString(read)
		if len(text) == crtListLineSize-1 && text[len(text)-1] != '\n' {
			f.stop, f.stopLine = crtListTooLong, number
			return f
		}
		if text != "" && (text[0] == '#' || text[0] == '\n' || text[0] == '\r') {
			continue
		}
		if strings.HasSuffix(text, "\n") {
			text = text[:len(text)-1]
		} else {
			// No '\n' before the end of the C string: the last line
			// of the file, or a NUL cut it short. A further read is
			// then refused as a stray NUL.
			truncated = true
		}
		f.lines = append(f.lines, fileLine{number: number, text: text, undefined: text == "" && read != ""})
	}
	f.missingLF = truncated
	return f
}

// nulLine returns the 1-based line ('\n'-separated) holding content's first
// NUL byte and its 1-based column, or 0, 0 when it has none.
func nulLine(content string) (line, column int) {
	i := strings.IndexByte(content, 0)
	if i < 0 {
		return 0, 0
	}
	start := strings.LastIndexByte(content[:i], '\n') + 1
	return strings.Count(content[:i], "\n") + 1, i - start + 1
}

// lineAt returns the 1-based line of content holding byte i, and its text.
func lineAt(content string, i int) (int, string) {
	start := strings.LastIndexByte(content[:i], '\n') + 1
	end := strings.IndexByte(content[i:], '\n')
	if end < 0 {
		end = len(content)
	} else {
		end += i
	}
	return strings.Count(content[:start], "\n") + 1, content[start:end]
}

// checkNUL refuses a NUL byte in content, a file the policy reads as
// configuration (haproxy.cfg when from is nil).
func (r *policyRun) checkNUL(content string, from *nestedFile) {
	line, column := nulLine(content)
	if line == 0 {
		return
	}
	_, text := lineAt(content, strings.IndexByte(content, 0))
	file := ConfigFile
	if from != nil {
		file = from.name
	}
	r.report(locate(from, line, text), "NUL", RuleNoNUL, fmt.Sprintf(
		"%s has a NUL byte on line %d (column %d): haproxy's readers end a line's text at a NUL and disagree on what follows it (a crt-list comment hides the rest of its 64 KiB read, which then counts as a line of its own), so a file haproxy reads as configuration may not contain one; remove it",
		file, line, column))
}

// checkCrtList checks a crt-list's lines as crtlist_parse_file reads them.
func (r *policyRun) checkCrtList(content string, from *nestedFile) {
	r.checkNUL(content, from)
	f := readCrtList(content)
	if f.stop == crtListTooLong {
		text := ""
		if lines := strings.SplitN(content, "\n", f.stopLine+1); f.stopLine <= len(lines) {
			text = lines[f.stopLine-1]
		}
		r.report(locate(from, f.stopLine, text), "crt-list", RuleLineTooLong, fmt.Sprintf(
			"%s line %d is %d bytes or longer: haproxy reads a crt-list in reads of %d bytes and refuses a longer line; put the certificate's options on a shorter line",
			from.name, f.stopLine, crtListLineSize-1, crtListLineSize-1))
	}
	for _, l := range f.lines {
		r.checkCrtListLine(locate(from, l.number, l.text), splitCrtListLine(l.text), from)
	}
}
