package haproxy

import "strings"

// The tables below list every keyword of haproxy 2.6 and 3.0 that takes a
// file or a directory, and every keyword the policy refuses outright. They
// were drawn from the configuration manuals (Debian's
// /usr/share/doc/haproxy/configuration.txt.gz, versions 2.6.12 and 3.0.11;
// each entry cites its section) and checked against the sources (v2.6.0,
// v3.0.0); an entry new in 3.0 says since: "3.0". The test
// TestPolicyFileTableAgainstHAProxy runs both haproxies on every entry of
// their branch with a missing absolute path and requires haproxy to report
// that path (or to open it), so an entry that haproxy -c does not read
// fails there unless the entry says why (field unprovable); and
// TestPolicyFileArguments requires the policy to refuse each outside path
// on its line.
//
// One policy serves both branches: an entry of 3.0 applied to 2.6 refuses
// a keyword 2.6 does not know and would refuse itself, so it is only
// stricter there. So is the pattern-name rule below: 2.6 reads "file@x"
// as a relative name, 3.0 strips the prefix.
//
// Not file arguments, and allowed, because haproxy -c never opens them: it
// stops after parsing and checking, before binding listeners, connecting
// log servers, writing a pid file, changing root or user:
//
//   - addresses: "bind /path", "bind unix@/path", "stats socket /path",
//     "log /dev/log", "log-stderr", "dgram-bind", "peer", "server",
//     "nameserver", "mailer", "unix-bind prefix <dir>" (3.1, 3.5, 3.6,
//     3.10, 4.2, 5.3.2, 11);
//   - "pidfile <file>" (3.1, written at start-up), "chroot <dir>" (3.1,
//     entered at start-up), "user"/"group"/"uid"/"gid" (3.1, 3.7);
//   - "docroot <path>" (10.1.1): a path on the FastCGI server, sent to it;
//   - "ssl-load-extra-files" (3.1) takes keywords, not paths: the extra
//     files (<crt>.key, .ocsp, .issuer, .sctl, bundles <crt>.rsa ...) are
//     named after a certificate, so they are inside when it is;
//   - "parse-resolv-conf" (5.3.2) reads the fixed /etc/resolv.conf, which
//     haproxy reads anyway for the httpclient's default resolvers section;
//     a template cannot redirect it;
//   - "errorfiles <name>" (4.2) and "http-... return errorfiles <name>"
//     name an http-errors section, not a file.

// fileBase is a global directive whose value prefixes relative paths.
type fileBase int

const (
	baseNone fileBase = iota
	// baseCrt: crt-base (3.1) prefixes "crt" and the certificates of a
	// crt-list, not the crt-list file itself (cfgparse-ssl.c, verified
	// against haproxy -c).
	baseCrt
	// baseCA: ca-base (3.1) prefixes ca-file, ca-verify-file,
	// ca-sign-file and crl-file (bind, server and crt-list).
	baseCA
	// baseServerState: server-state-base (3.2) prefixes server-state-file
	// and server-state-file-name.
	baseServerState
	// baseKey: key-base (3.0: 3.1 and 3.12) prefixes the key of a
	// crt-store load line, and nothing else (not a crt-list's key).
	baseKey
	numBases
)

var baseNames = [numBases]string{"", "crt-base", "ca-base", "server-state-base", "key-base"}

// nestedKind is the syntax of a file that names more files, which the
// policy reads from the rendering and checks with the same rules.
type nestedKind int

const (
	nestedNone nestedKind = iota
	// nestedCrtList: certificates and ssl options, one line each (5.1
	// "crt-list"); checked line by line.
	nestedCrtList
	// nestedSPOE: a SPOE configuration, parsed by haproxy's own
	// configuration parser (9.3; flt_spoe.c calls readcfgfile), with ACLs
	// and sample expressions; checked as haproxy.cfg is.
	nestedSPOE
	// nestedLogFormat: a log-format string (4.2 "lf-file"), whose sample
	// expressions may call map converters; checked for them.
	nestedLogFormat
)

// fileKind says where in a line an entry's file is.
type fileKind int

const (
	// kindDirective: the line's keyword; the file is at the word
	// positions fileEntry.at returns.
	kindDirective fileKind = iota
	// kindOption: a word anywhere after the keyword, the file is the
	// next word (bind and server options, ACL -f, http reply options).
	kindOption
	// kindAction: a word "name(<file>)" (the action keyword is matched
	// by prefix, KWF_MATCH_PREFIX in http_act.c).
	kindAction
	// kindConverter: a converter "name(arg,...)" in a sample expression,
	// the file is argument argIndex.
	kindConverter
	// kindCrtList: an ssl option or the certificate of a crt-list line.
	kindCrtList
)

// fileEntry is one place where haproxy 2.6 or 3.0 takes a file or directory.
type fileEntry struct {
	// id names the entry (tests map probes to it).
	id string
	// name is the keyword, option, action or converter as written,
	// lowercase. The policy compares lowercased words: haproxy's
	// keywords are case-sensitive (an uppercase spelling is an unknown
	// keyword), so this only makes the policy stricter.
	name string
	kind fileKind
	// at returns the positions of the file words of a kindDirective line
	// (the words after a "no"/"default" prefix).
	at func(words []string) []int
	// lines restricts a kindOption entry to lines with these keywords;
	// nil means every line.
	lines []string
	// argIndex is the file argument of a kindConverter entry.
	argIndex int
	// base is the directive prefixing this entry's relative paths.
	base fileBase
	// sets is the base a base directive sets.
	sets fileBase
	// systemCA: the value "@system-ca" loads the system's CA store (public
	// certificates) instead of a file (ssl_ckch.c
	// ssl_store_load_locations_file); allowed when no ca-base prefixes it.
	systemCA bool
	// list: the argument is a list of paths separated by this byte.
	list   byte
	nested nestedKind
	// lua: a Lua directive, refused unless Policy.AllowLua; its file is
	// checked when Lua is allowed.
	lua bool
	// patternName: the argument names a pattern file (ACL -f, maps), which
	// haproxy 3.0 reads after a "file@" or "opt@" prefix ("virt@" names
	// no file): the rest is checked too (2.7 "Name format for maps and
	// ACLs", pattern.c pat_ref_new).
	patternName bool
	// doc is the section of configuration.txt (haproxy 2.6, or 3.0 for its
	// entries) describing it.
	doc string
	// unprovable says why haproxy -c cannot be shown to read this file
	// (the real-haproxy test leaves the entry out); "" when it can.
	// unprovableIn says it for one branch only.
	unprovable   string
	unprovableIn map[string]string
	// since is the first branch that has the entry ("" for 2.6, the
	// oldest covered). The policy applies every entry to every branch:
	// an older haproxy refuses a keyword it does not know anyway, so an
	// entry of a newer one only makes the policy stricter there; the
	// real-haproxy test probes an entry on the branches that have it.
	since string
}

// unprovableOn is why the entry cannot be probed on branch, "" when it can
// (or e is nil: a probe of no entry).
func (e *fileEntry) unprovableOn(branch string) string {
	if e == nil {
		return ""
	}
	if why, ok := e.unprovableIn[branch]; ok {
		return why
	}
	return e.unprovable
}

// wordAt returns position n when the line has it.
func wordAt(n int) func([]string) []int {
	return func(words []string) []int {
		if n < len(words) {
			return []int{n}
		}
		return nil
	}
}

// loadLines are a crt-store section's load lines (3.0).
var loadLines = []string{"load"}

// httpReplyLines are the keywords whose rules build an HTTP reply from a
// file ("return", "deny", "tarpit" actions and http-error, 4.2).
var httpReplyLines = []string{"http-request", "http-response", "http-after-response", "http-error"}

// notBuilt is why an entry for an optional module cannot be probed.
const notBuilt = "the module is not built into Debian's haproxy 2.6.12 or 3.0.11 (haproxy -vv lists it as disabled), which then refuses the keyword as unknown"

// fileEntries is every file-taking place of haproxy 2.6 and 3.0.
var fileEntries = []fileEntry{
	// Global section, 3.1 "Process management and security".
	{id: "ca-base", name: "ca-base", kind: kindDirective, at: wordAt(1), sets: baseCA, doc: "3.1 ca-base <dir>"},
	{id: "crt-base", name: "crt-base", kind: kindDirective, at: wordAt(1), sets: baseCrt, doc: "3.1 crt-base <dir>"},
	{id: "51degrees-data-file", name: "51degrees-data-file", kind: kindDirective, at: wordAt(1), doc: "3.1 51degrees-data-file <file path>", unprovable: notBuilt},
	{id: "deviceatlas-json-file", name: "deviceatlas-json-file", kind: kindDirective, at: wordAt(1), doc: "3.1 deviceatlas-json-file <path>", unprovable: notBuilt},
	{id: "wurfl-data-file", name: "wurfl-data-file", kind: kindDirective, at: wordAt(1), doc: "3.1 wurfl-data-file <file path>", unprovable: notBuilt},
	{id: "wurfl-patch-file", name: "wurfl-patch-file", kind: kindDirective, at: wordAt(1), doc: "3.1 wurfl-patch-file [<file path>]", unprovable: notBuilt},
	{id: "h1-case-adjust-file", name: "h1-case-adjust-file", kind: kindDirective, at: wordAt(1), doc: "3.1 h1-case-adjust-file <hdrs-file>"},
	// httpclient.ssl.ca-file takes no ca-base (http_client.c).
	{id: "httpclient.ssl.ca-file", name: "httpclient.ssl.ca-file", kind: kindDirective, at: wordAt(1), systemCA: true, doc: "3.1 httpclient.ssl.ca-file <cafile>"},
	{id: "issuers-chain-path", name: "issuers-chain-path", kind: kindDirective, at: wordAt(1), doc: "3.1 issuers-chain-path <dir>"},
	{id: "lua-load", name: "lua-load", kind: kindDirective, at: wordAt(1), lua: true, doc: "3.1 lua-load <file>"},
	{id: "lua-load-per-thread", name: "lua-load-per-thread", kind: kindDirective, at: wordAt(1), lua: true, doc: "3.1 lua-load-per-thread <file>"},
	// A ';'-separated list of search templates ("general/?.lua").
	{id: "lua-prepend-path", name: "lua-prepend-path", kind: kindDirective, at: wordAt(1), lua: true, list: ';', doc: "3.1 lua-prepend-path <string> [<type>]",
		unprovable: "it only prepends to Lua's package.path or package.cpath; nothing is read until Lua code calls require"},
	{id: "ssl-dh-param-file", name: "ssl-dh-param-file", kind: kindDirective, at: wordAt(1), doc: "3.1 ssl-dh-param-file <file>"},
	// 3.0: counters preloaded from a file, opened before haproxy -c
	// exits (haproxy.c apply_stats_file); its warning names no path, so
	// the probe is a FIFO.
	{id: "stats-file", name: "stats-file", kind: kindDirective, at: wordAt(1), since: "3.0", doc: "3.1 stats-file <path> (3.0)"},
	// 3.0: prefixes the key of crt-store load lines, in global and in a
	// crt-store section.
	{id: "key-base", name: "key-base", kind: kindDirective, at: wordAt(1), sets: baseKey, since: "3.0", doc: "3.1 and 3.12 key-base <dir> (3.0)"},

	// Global section, 3.2 "Performance tuning".
	{id: "server-state-base", name: "server-state-base", kind: kindDirective, at: wordAt(1), sets: baseServerState, doc: "3.2 server-state-base <directory>"},
	{id: "server-state-file", name: "server-state-file", kind: kindDirective, at: wordAt(1), base: baseServerState, doc: "3.2 server-state-file <file>"},

	// Ring sections, 3.9. The file is created (and an existing one
	// renamed to .bak) while the line is parsed, even by haproxy -c.
	{id: "backing-file", name: "backing-file", kind: kindDirective, at: wordAt(1), doc: "3.9 backing-file <path>"},

	// Proxies (4.2) and http-errors sections (3.8).
	{id: "errorfile", name: "errorfile", kind: kindDirective, at: wordAt(2), doc: "3.8 and 4.2 errorfile <code> <file>"},
	{id: "server-state-file-name", name: "server-state-file-name", kind: kindDirective, base: baseServerState, doc: "4.2 server-state-file-name [ { use-backend-name | <file> } ]",
		at: func(words []string) []int {
			if len(words) > 1 && words[1] != "use-backend-name" {
				return []int{1}
			}
			return nil
		}},
	{id: "filter spoe config", name: "filter", kind: kindDirective, nested: nestedSPOE, doc: "9.3 filter spoe [engine <name>] config <file>",
		at: func(words []string) []int {
			if len(words) < 2 || strings.ToLower(words[1]) != "spoe" {
				return nil
			}
			var at []int
			for i := 2; i+1 < len(words); i++ {
				if strings.ToLower(words[i]) == "config" {
					at = append(at, i+1)
				}
			}
			return at
		}},

	// HTTP replies from a file: "http-request return|deny|tarpit",
	// "http-response return|deny" and "http-error" (4.2). The payload of
	// lf-file is a log-format string, parsed at once.
	{id: "reply errorfile", name: "errorfile", kind: kindOption, lines: httpReplyLines, doc: "4.2 http-request return ... errorfile <file>"},
	{id: "reply file", name: "file", kind: kindOption, lines: httpReplyLines, doc: "4.2 http-request return ... file <file>"},
	{id: "reply lf-file", name: "lf-file", kind: kindOption, lines: httpReplyLines, nested: nestedLogFormat, doc: "4.2 http-request return ... lf-file <file>"},

	// ACL pattern files, in "acl" lines and anonymous ACLs "{ ... }"
	// (7.1, 7.2; also in fcgi-app and spoe-message sections). Every line:
	// "-f" is an ACL flag wherever it appears.
	{id: "acl -f", name: "-f", kind: kindOption, patternName: true, doc: "7.1 acl <aclname> <criterion> [flags] ... (-f <file>), 7.2 anonymous ACLs"},

	// Bind options, 5.1 (also on "stats socket", "default-bind", peers'
	// and log-forward's "bind"), and server options, 5.2 (also on
	// "default-server", "server-template", peers' "peer"/"server" and
	// rings' "server"). Checked on every line.
	{id: "ca-file", name: "ca-file", kind: kindOption, base: baseCA, systemCA: true, doc: "5.1 and 5.2 ca-file <cafile>"},
	{id: "ca-verify-file", name: "ca-verify-file", kind: kindOption, base: baseCA, systemCA: true, doc: "5.1 ca-verify-file <cafile>"},
	{id: "ca-sign-file", name: "ca-sign-file", kind: kindOption, base: baseCA, doc: "5.1 ca-sign-file <cafile>"},
	{id: "crl-file", name: "crl-file", kind: kindOption, base: baseCA, systemCA: true, doc: "5.1 and 5.2 crl-file <crlfile>"},
	{id: "crt", name: "crt", kind: kindOption, base: baseCrt, doc: "5.1 and 5.2 crt <cert>"},
	{id: "crt-list", name: "crt-list", kind: kindOption, nested: nestedCrtList, doc: "5.1 crt-list <file>"},
	{id: "tls-ticket-keys", name: "tls-ticket-keys", kind: kindOption, doc: "5.1 tls-ticket-keys <keyfile>"},
	// 3.0: the certificate of connections without SNI, parsed as crt is.
	{id: "default-crt", name: "default-crt", kind: kindOption, base: baseCrt, since: "3.0", doc: "5.1 default-crt <cert> (3.0)"},

	// 3.0: a crt-store section's load lines (3.12.1); their "crt" is the
	// every-line option above. "key" only on load lines: elsewhere the
	// word is not a file ("filter bwlim-in ... key <pattern>").
	{id: "load key", name: "key", kind: kindOption, lines: loadLines, base: baseKey, since: "3.0", doc: "3.12.1 load ... key <filename> (3.0)"},
	{id: "load ocsp", name: "ocsp", kind: kindOption, lines: loadLines, base: baseCrt, since: "3.0", doc: "3.12.1 load ... ocsp <filename> (3.0)"},
	{id: "load issuer", name: "issuer", kind: kindOption, lines: loadLines, base: baseCrt, since: "3.0", doc: "3.12.1 load ... issuer <filename> (3.0)"},
	{id: "load sctl", name: "sctl", kind: kindOption, lines: loadLines, base: baseCrt, since: "3.0", doc: "3.12.1 load ... sctl <filename> (3.0)"},

	// The lines of a crt-list file (5.1 crt-list): the certificate, and
	// the ssl options taking files.
	{id: "crt-list certificate", name: "certificate", kind: kindCrtList, base: baseCrt, doc: "5.1 crt-list: <crtfile> [\\[<sslbindconf> ...\\]] [[!]<snifilter> ...]"},
	{id: "crt-list ca-file", name: "ca-file", kind: kindCrtList, base: baseCA, systemCA: true, doc: "5.1 crt-list <sslbindconf> ca-file"},
	{id: "crt-list ca-verify-file", name: "ca-verify-file", kind: kindCrtList, base: baseCA, systemCA: true, doc: "5.1 crt-list <sslbindconf> ca-verify-file"},
	{id: "crt-list crl-file", name: "crl-file", kind: kindCrtList, base: baseCA, systemCA: true, doc: "5.1 crt-list <sslbindconf> crl-file"},
	// 3.0: a crt-list line takes a load line's keywords too. haproxy
	// applies no base to them there (the crt-store bases exist only
	// inside a crt-store section), so none is.
	{id: "crt-list key", name: "key", kind: kindCrtList, since: "3.0", doc: "5.1 crt-list <sslbindconf> key <filename> (3.0, 3.12.1)"},
	{id: "crt-list ocsp", name: "ocsp", kind: kindCrtList, since: "3.0", doc: "5.1 crt-list <sslbindconf> ocsp <filename> (3.0, 3.12.1)"},
	{id: "crt-list issuer", name: "issuer", kind: kindCrtList, since: "3.0", doc: "5.1 crt-list <sslbindconf> issuer <filename> (3.0, 3.12.1)"},
	{id: "crt-list sctl", name: "sctl", kind: kindCrtList, since: "3.0", doc: "5.1 crt-list <sslbindconf> sctl <filename> (3.0, 3.12.1)"},
	{id: "crt-list crt", name: "crt", kind: kindCrtList, base: baseCrt, since: "3.0", doc: "5.1 crt-list <sslbindconf> crt <filename> (3.0, 3.12.1)",
		unprovable: "ssl_crtlist.c crtlist_parse_file replaces it with the line's own certificate: haproxy -c never opens it, and the policy refuses an outside one all the same"},

	// Actions updating a pattern file at run time (4.2): the name is
	// only stored; at run time haproxy looks it up among the pattern
	// files already loaded and never opens it.
	{id: "set-map", name: "set-map", kind: kindAction, patternName: true, doc: "4.2 http-request/http-response set-map(<file-name>)", unprovable: unprovableAction},
	{id: "del-map", name: "del-map", kind: kindAction, patternName: true, doc: "4.2 http-request/http-response del-map(<file-name>)", unprovable: unprovableAction},
	{id: "add-acl", name: "add-acl", kind: kindAction, patternName: true, doc: "4.2 http-request/http-response add-acl(<file-name>)", unprovable: unprovableAction},
	{id: "del-acl", name: "del-acl", kind: kindAction, patternName: true, doc: "4.2 http-request/http-response del-acl(<file-name>)", unprovable: unprovableAction},

	// jwt_verify loads a constant <key> as a certificate path at parse
	// time (sample.c sample_conv_jwt_verify_check), whatever the
	// algorithm, and says nothing when it fails: the test proves the read
	// with a FIFO.
	{id: "jwt_verify", name: "jwt_verify", kind: kindConverter, argIndex: 1, doc: "7.3.1 jwt_verify(<alg>,<key>)"},
}

// unprovableAction: for these entries the real-haproxy test shows the
// opposite, that haproxy -c leaves a FIFO at the path unopened. They stay
// in the table: the deployed haproxy looks the name up, and a reference
// outside the directory is a template error worth reporting.
const unprovableAction = "haproxy -c never opens it: http_act.c parse_http_set_map only stores the name, looked up among the loaded pattern files at run time"

// mapConverters are the map converters of haproxy 2.6 (7.3.1 map, map_<match_type>,
// map_<match_type>_<output_type>; src/map.c). Each loads its first
// argument as a map file while the configuration is parsed.
var mapConverters = []string{
	"map", "map_str", "map_beg", "map_sub", "map_dir", "map_dom", "map_end", "map_reg", "map_regm", "map_int", "map_ip",
	"map_str_int", "map_beg_int", "map_sub_int", "map_dir_int", "map_dom_int", "map_end_int", "map_reg_int", "map_int_int", "map_ip_int",
	"map_str_ip", "map_beg_ip", "map_sub_ip", "map_dir_ip", "map_dom_ip", "map_end_ip", "map_reg_ip", "map_int_ip", "map_ip_ip",
}

// mapKeyConverters are haproxy 3.0's map_<match_type>_key (7.3.1, output
// type "key"; map.c), loading their argument as the others do.
var mapKeyConverters = []string{
	"map_str_key", "map_beg_key", "map_sub_key", "map_dir_key", "map_dom_key", "map_end_key", "map_reg_key", "map_int_key", "map_ip_key",
}

func init() {
	for _, name := range mapConverters {
		fileEntries = append(fileEntries, fileEntry{id: name, name: name, kind: kindConverter, argIndex: 0, patternName: true, doc: "7.3.1 " + name + "(<map_file>[,<default_value>])"})
	}
	for _, name := range mapKeyConverters {
		fileEntries = append(fileEntries, fileEntry{id: name, name: name, kind: kindConverter, argIndex: 0, patternName: true, since: "3.0", doc: "7.3.1 " + name + "(<map_name>) (3.0)"})
	}
}

// converterEntry returns the entry of a converter name (lowercase). Any
// name starting with "map_" counts as a map converter: haproxy refuses the
// ones it does not know, so this is only stricter.
func converterEntry(name string) *fileEntry {
	if name == "map" || strings.HasPrefix(name, "map_") {
		return &mapEntry
	}
	if name == "jwt_verify" {
		return &jwtEntry
	}
	return nil
}

var mapEntry, jwtEntry fileEntry

// entriesByKind indexes fileEntries for the checker.
var (
	directiveEntries = map[string][]*fileEntry{}
	optionEntries    = map[string][]*fileEntry{}
	actionEntries    []*fileEntry
	// crtListOptions are the ssl options of a crt-list line naming files;
	// crtListCertificate is its first word.
	crtListOptions     = map[string]*fileEntry{}
	crtListCertificate *fileEntry
)

func init() {
	for i := range fileEntries {
		e := &fileEntries[i]
		switch e.kind {
		case kindDirective:
			directiveEntries[e.name] = append(directiveEntries[e.name], e)
		case kindOption:
			optionEntries[e.name] = append(optionEntries[e.name], e)
		case kindAction:
			actionEntries = append(actionEntries, e)
		case kindCrtList:
			if e.id == "crt-list certificate" {
				crtListCertificate = e
			} else {
				crtListOptions[e.name] = e
			}
		case kindConverter:
			switch e.id {
			case "map":
				mapEntry = *e
			case "jwt_verify":
				jwtEntry = *e
			}
		}
	}
}

// Rule ids: the stable names a Violation gives the rule it breaks.
const (
	// RuleNoLua: lua-load, lua-load-per-thread and lua-prepend-path run
	// or locate Lua code, which haproxy -c executes while parsing.
	// Allowed by Policy.AllowLua.
	RuleNoLua = "no-lua"
	// RuleNoExternalCommand: external checks ("external-check" in global,
	// "option external-check", "external-check command|path"), program
	// sections and their "command", insecure-fork-wanted and
	// insecure-setuid-wanted start or enable external programs.
	RuleNoExternalCommand = "no-external-command"
	// RuleNoSetenv: setenv, presetenv, resetenv and unsetenv change the
	// environment later lines expand.
	RuleNoSetenv = "no-setenv"
	// RuleNoEnvExpansion: "$X", "${X}" (and pseudo-variables such as
	// ${.LINE}) inside double quotes expand from the environment; the
	// check has none, so a variable would silently become "".
	RuleNoEnvExpansion = "no-env-expansion"
	// RuleNoEngine: ssl-engine, ssl-provider and ssl-provider-path load
	// shared objects (OpenSSL engines, providers) into haproxy.
	RuleNoEngine = "no-engine"
	// RuleFileInside: a file or directory argument, or a base directive
	// (crt-base, ca-base, server-state-base), is not a relative path
	// inside the check's directory, or resolves outside it through a base.
	RuleFileInside = "file-inside"
	// RuleDefaultPath: "default-path parent" or "default-path origin
	// <path>" resolves relative paths outside the check's directory.
	RuleDefaultPath = "default-path"
	// RuleNamespaceName: a bind or server "namespace" is not a plain
	// name (haproxy opens /var/run/netns/<name>).
	RuleNamespaceName = "namespace-name"
	// RuleUnsupportedNestedConfig: a file whose contents are more
	// configuration the policy does not read: the OpenTracing filter's
	// configuration (it names a tracer plugin, a shared object haproxy
	// loads), or a file-naming file referenced from within a nested file.
	RuleUnsupportedNestedConfig = "unsupported-nested-config"
	// RuleNoNUL: a NUL byte in a file haproxy reads as configuration
	// (haproxy.cfg, a crt-list, a SPOE configuration, an lf-file):
	// haproxy's readers end a line at it and disagree on what follows
	// (policy_files.go).
	RuleNoNUL = "no-nul"
	// RuleLineTooLong: a crt-list line longer than haproxy's read buffer
	// (65,535 bytes with its newline), which haproxy reads in pieces.
	RuleLineTooLong = "line-too-long"
	// RuleNoPrivilege: setcap (3.0) keeps Linux capabilities in the
	// running haproxy.
	RuleNoPrivilege = "no-privilege"
	// RuleNoTrace: trace (3.0) turns on haproxy's developer traces,
	// which can copy traffic to standard output or rings.
	RuleNoTrace = "no-trace"
)

// refusal is a keyword the policy refuses whatever its arguments.
type refusal struct {
	keyword string
	// second, when set, is the word the keyword must be followed by.
	second string
	// values, when set, lists the refused values of the next word (after
	// second, or after keyword); other values pass.
	values []string
	rule   string
	// offByNo: the "no" prefix turns the keyword off: allowed then.
	offByNo bool
	// lua: allowed by Policy.AllowLua.
	lua bool
	// why and proceed make the message (no-lua and no-setenv have their
	// own); doc is the section of configuration.txt.
	why     string
	proceed string
	doc     string
}

const (
	proceedRemove    = "remove the line"
	externalWhy      = "starts external programs, and Gatehouse's check never runs programs"
	externalProceeds = "remove the line; use agent-check or an HTTP health check instead of external checks"
	engineWhy        = "loads a shared object into haproxy"
)

var refusals = []refusal{
	{keyword: "lua-load", rule: RuleNoLua, lua: true, doc: "3.1"},
	{keyword: "lua-load-per-thread", rule: RuleNoLua, lua: true, doc: "3.1"},
	{keyword: "lua-prepend-path", rule: RuleNoLua, lua: true, doc: "3.1"},
	// In global "external-check" enables external checks; in proxies
	// "external-check command <cmd>" and "external-check path <path>"
	// name what runs.
	{keyword: "external-check", rule: RuleNoExternalCommand, why: externalWhy, proceed: externalProceeds, doc: "3.1, 4.2"},
	{keyword: "option", second: "external-check", rule: RuleNoExternalCommand, offByNo: true, why: externalWhy, proceed: externalProceeds, doc: "4.2"},
	{keyword: "insecure-fork-wanted", rule: RuleNoExternalCommand, offByNo: true, why: "lets haproxy fork external programs", proceed: proceedRemove, doc: "3.1"},
	{keyword: "insecure-setuid-wanted", rule: RuleNoExternalCommand, offByNo: true, why: "lets haproxy run setuid programs", proceed: proceedRemove, doc: "3.1"},
	{keyword: "program", rule: RuleNoExternalCommand, why: "starts a program section, run by the master process", proceed: "remove the section", doc: "3.7"},
	{keyword: "command", rule: RuleNoExternalCommand, why: "names the program a program section runs", proceed: "remove the section", doc: "3.7"},
	{keyword: "setenv", rule: RuleNoSetenv, doc: "3.1"},
	{keyword: "presetenv", rule: RuleNoSetenv, doc: "3.1"},
	{keyword: "resetenv", rule: RuleNoSetenv, doc: "3.1"},
	{keyword: "unsetenv", rule: RuleNoSetenv, doc: "3.1"},
	{keyword: "ssl-engine", rule: RuleNoEngine, why: engineWhy + " (an OpenSSL engine)", proceed: proceedRemove, doc: "3.2"},
	{keyword: "ssl-provider", rule: RuleNoEngine, why: engineWhy + " (an OpenSSL provider)", proceed: proceedRemove, doc: "3.1"},
	{keyword: "ssl-provider-path", rule: RuleNoEngine, why: "chooses where haproxy loads OpenSSL providers (shared objects) from", proceed: proceedRemove, doc: "3.1"},
	{keyword: "filter", second: "opentracing", rule: RuleUnsupportedNestedConfig,
		why:     "reads an OpenTracing configuration, which the policy does not check and which names a tracer plugin (a shared object haproxy loads)",
		proceed: "remove the filter from the checked configuration", doc: "9.6"},
	{keyword: "setcap", rule: RuleNoPrivilege, why: "keeps Linux capabilities in the running haproxy, which a rendering must not decide", proceed: "remove the line; the platform grants capabilities where haproxy is deployed", doc: "3.1 (3.0)"},
	{keyword: "trace", rule: RuleNoTrace, why: "turns on haproxy's developer traces, which can copy traffic to standard output or rings", proceed: proceedRemove, doc: "3.1 (3.0)"},
	{keyword: "default-path", values: []string{"parent", "origin"}, rule: RuleDefaultPath,
		why:     "resolves relative paths outside the check's directory",
		proceed: `use "default-path config" (or "current"): the check runs in the directory of haproxy.cfg`, doc: "3.1"},
}

// sectionKeywords start a section in haproxy 2.6 and 3.0
// (REGISTER_CONFIG_SECTION in their sources; crt-store is 3.0's; spoe-*
// only inside a SPOE configuration).
var sectionKeywords = map[string]bool{
	"global": true, "defaults": true, "frontend": true, "backend": true, "listen": true,
	"userlist": true, "peers": true, "mailers": true, "namespace_list": true,
	"resolvers": true, "http-errors": true, "ring": true, "log-forward": true,
	"cache": true, "program": true, "fcgi-app": true, "crt-store": true,
	"spoe-agent": true, "spoe-group": true, "spoe-message": true,
}
