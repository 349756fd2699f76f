// Package state names what tollgate keeps for its tenants and operators
// beyond a restart, and the form that state takes when it leaves a store:
// a stream of records, one JSON object a line (Record), that `tollgate
// state export` writes and `tollgate state import` reads, the same whether
// the records came from the embedded store (state/bolt) or from Redis.
//
// A record is a table (the part of tollgate that owns it: "cloudmap",
// "servicequotas"), a key and a value, each a string. Each owner defines
// its keys and encodes its values itself, once, for both stores: the
// Cloud Map registry's records are the fields of its Redis hashes, the
// Service Quotas requests their JSON.
//
// The package owns the record format and its reader and writer. It never
// opens a file or a network connection.
package state
