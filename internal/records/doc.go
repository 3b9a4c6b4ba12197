// Package records signs and verifies the records Gatehouse writes on
// objects and later reads as its own (a config's author, for one): an
// HMAC-SHA256 with a key only this install reads, kept and rotated like
// the serving CA (internal/certs): in a Secret of Gatehouse's namespace
// that every replica follows and the leader rotates, or in a directory
// for local runs. A record is signed with the newest key every replica
// has had time to load and verified with every key still kept, so a
// rotation never invalidates records at once.
package records
