// Package textcut shortens text for messages of bounded size (denials,
// Events, report entries, log values) without splitting a UTF-8 sequence:
// a cut inside one would put an invalid byte sequence into a JSON answer or
// an Event, which kube-apiserver and kubectl show as replacement
// characters or refuse. Every package that bounds a message uses it, each
// with the mark its readers know.
package textcut
