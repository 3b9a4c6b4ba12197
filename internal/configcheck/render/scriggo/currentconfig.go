package scriggo

import (
	"net"
	"strconv"
	"strings"
)

// sectionKeywords start a section of haproxy.cfg.
var sectionKeywords = map[string]bool{
	"global": true, "defaults": true, "frontend": true, "backend": true, "listen": true,
	"peers": true, "resolvers": true, "userlist": true, "cache": true, "program": true,
	"http-errors": true, "ring": true, "mailers": true, "crt-store": true, "log-forward": true,
	"fcgi-app": true, "traces": true,
}

// parseCurrentConfig reads the part of an haproxy.cfg haptic's templates
// see as currentConfig: each backend section with its server lines (name,
// address, port), which haptic's slot preservation looks up. What it does
// not read (other sections, other keywords) it skips, as the templates
// never see it; a server line without a name and an address is skipped
// too. The text is a validation test's, bounded by its config's size.
func parseCurrentConfig(text string) *currentConfig {
	cfg := &currentConfig{}
	var backend *currentBackend
	for line := range strings.Lines(text) {
		fields := strings.Fields(stripComment(line))
		if len(fields) == 0 {
			continue
		}
		if sectionKeywords[fields[0]] {
			backend = nil
			if fields[0] == "backend" && len(fields) > 1 {
				cfg.Backends = append(cfg.Backends, currentBackend{Name: fields[1], Servers: map[string]currentServer{}})
				backend = &cfg.Backends[len(cfg.Backends)-1]
			}
			continue
		}
		if backend == nil || fields[0] != "server" || len(fields) < 3 {
			continue
		}
		address, port := splitServerAddress(fields[2])
		backend.Servers[fields[1]] = currentServer{Name: fields[1], Address: address, Port: port}
	}
	return cfg
}

// stripComment cuts a line at a # that starts a comment: at the start of
// the line or after a space, outside quotes.
func stripComment(line string) string {
	var quote byte
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}

// splitServerAddress splits a server address as haptic's parser reports
// it: host and port ("10.0.0.1:8080", "[::1]:80", "ipv4@10.0.0.1:80"); an
// address without a port, or a socket path (unix@…), has no port.
func splitServerAddress(addr string) (string, *int64) {
	if i := strings.Index(addr, "@"); i >= 0 {
		family := addr[:i]
		if family != "ipv4" && family != "ipv6" {
			return addr, nil
		}
		addr = addr[i+1:]
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return strings.Trim(addr, "[]"), nil
	}
	port, err := strconv.ParseInt(portText, 10, 64)
	if err != nil {
		return host, nil
	}
	return host, &port
}
