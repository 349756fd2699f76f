package cloudmap

import (
	"maps"
	"slices"
	"strconv"
)

// state is the registry of one account and region. Every change bumps Seq,
// so Seq tells whether a cached copy is current. A service's Revision (its
// InstancesRevision) is the Seq of its last registration or
// deregistration: revisions only grow, across nodes too.
//
// Every change goes through the methods below, which keep the derived
// indexes and the size right and note what changed (for the Redis store,
// which writes only that).
type state struct {
	Seq        int64
	Namespaces map[string]*namespace // by id
	Services   map[string]*service   // by id
	Ops        map[string]*operation // by id
	OpOrder    []string              // oldest first
	Tags       map[string][]tagJSON  // by resource id (ns-… or srv-…)

	reqs   map[string]reqRef // instance CreatorRequestId -> instance
	size   int64             // estimated bytes held
	budget *budget           // nil: only the per-account quotas bound it
	dirty  map[change]bool   // what changed since the last commit; nil: not tracked
}

// reqRef is where an instance registered with a CreatorRequestId is.
type reqRef struct{ service, instance string }

type namespace struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Type        string `json:"type"` // HTTP, DNS_PRIVATE or DNS_PUBLIC
	Description string `json:"description,omitempty"`
	RequestID   string `json:"creator_request_id,omitempty"`
	OpID        string `json:"op_id"`
	Vpc         string `json:"vpc,omitempty"`
	SOATTL      *int64 `json:"soa_ttl,omitempty"`
	Created     int64  `json:"created"` // Unix milliseconds
	Updated     int64  `json:"updated,omitempty"`
	UpdaterID   string `json:"updater_request_id,omitempty"` // of the last update
	UpdateOp    string `json:"update_op,omitempty"`          // its operation
}

type service struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	NamespaceID string            `json:"namespace_id"`
	Type        string            `json:"type"` // HTTP, DNS_HTTP or DNS
	Description string            `json:"description,omitempty"`
	RequestID   string            `json:"creator_request_id,omitempty"`
	DNS         *dnsConfig        `json:"dns,omitempty"`
	HealthCheck *healthCheckJSON  `json:"health_check,omitempty"` // public DNS and HTTP namespaces, stored only
	Custom      *int32            `json:"custom_failure_threshold,omitempty"`
	HasCustom   bool              `json:"custom_health,omitempty"`
	Created     int64             `json:"created"`
	Attrs       map[string]string `json:"attrs,omitempty"` // service attributes

	Revision  int64                `json:"-"` // kept apart: it changes with every instance
	Instances map[string]*instance `json:"-"` // by id, kept apart
}

type instance struct {
	ID        string            `json:"id"`
	Attrs     map[string]string `json:"attrs,omitempty"`
	RequestID string            `json:"creator_request_id,omitempty"`
	OpID      string            `json:"op_id"`
	Unhealthy bool              `json:"unhealthy,omitempty"` // custom health status
}

type operation struct {
	ID      string            `json:"id"`
	Type    string            `json:"type"`
	Targets map[string]string `json:"targets"`
	Created int64             `json:"created"`
	Seq     int64             `json:"seq"` // orders operations
}

// change names one record that changed: kind is one of the kind*
// constants, id the record's (for an instance, service id and instance id).
type change struct{ kind, id, sub string }

const (
	kindNamespace = "n"
	kindService   = "s"
	kindRevision  = "r"
	kindInstance  = "i"
	kindOperation = "o"
	kindTags      = "t"
)

func newState() *state {
	return &state{Namespaces: map[string]*namespace{}, Services: map[string]*service{},
		Ops: map[string]*operation{}, Tags: map[string][]tagJSON{}, reqs: map[string]reqRef{}, size: scopeBytes}
}

func (s *state) note(kind, id, sub string) {
	if s.dirty != nil {
		s.dirty[change{kind, id, sub}] = true
	}
}

// Estimated sizes, in bytes, of what a state holds: maps, pointers and
// strings, so that the memory bound follows what a caller can make the
// registry hold.
const (
	scopeBytes     = 1024
	namespaceBytes = 512
	serviceBytes   = 768
	instanceBytes  = 256
	pairBytes      = 64 // one attribute or tag, beside its text
	operationBytes = 320
)

func attrsBytes(m map[string]string) int64 {
	n := int64(0)
	for k, v := range m {
		n += int64(len(k)+len(v)) + pairBytes
	}
	return n
}

func nsBytes(ns *namespace) int64 {
	return namespaceBytes + int64(len(ns.Name)+len(ns.Description)+len(ns.RequestID)+len(ns.Vpc))
}

func svcBytes(sv *service) int64 {
	n := serviceBytes + int64(len(sv.Name)+len(sv.Description)+len(sv.RequestID)) + attrsBytes(sv.Attrs)
	if sv.DNS != nil {
		n += int64(len(sv.DNS.DnsRecords)) * pairBytes
	}
	return n
}

func instBytes(in *instance) int64 {
	return instanceBytes + int64(len(in.ID)+len(in.RequestID)+len(in.OpID)) + attrsBytes(in.Attrs)
}

func opBytes(op *operation) int64 {
	n := operationBytes + int64(len(op.ID)+len(op.Type))
	for k, v := range op.Targets {
		n += int64(len(k) + len(v))
	}
	return n
}

func tagsBytes(tags []tagJSON) int64 {
	n := int64(0)
	for _, t := range tags {
		n += int64(len(t.Key)+len(t.Value)) + pairBytes
	}
	return n
}

// grow makes room for n more bytes, or fails with code when the state's
// budget has none left. A nil budget always has room.
func (s *state) grow(n int64, code string) error {
	if n > 0 && s.budget != nil {
		if err := s.budget.take(s.size, n, code); err != nil {
			return err
		}
	}
	s.size += n
	return nil
}

// shrink gives back n bytes.
func (s *state) shrink(n int64) {
	s.size -= n
	if s.budget != nil {
		s.budget.give(n)
	}
}

// putNamespace adds ns, which must be new, after making room for it.
func (s *state) putNamespace(ns *namespace, code string) error {
	if err := s.grow(nsBytes(ns), code); err != nil {
		return err
	}
	s.Seq++
	s.Namespaces[ns.ID] = ns
	s.note(kindNamespace, ns.ID, "")
	return nil
}

// changedNamespace records ns, a changed copy of a namespace of the state
// whose size was old, after the caller checked room for it (roomFor).
func (s *state) changedNamespace(ns *namespace, old int64) {
	s.Seq++
	s.resize(nsBytes(ns) - old)
	s.Namespaces[ns.ID] = ns
	s.note(kindNamespace, ns.ID, "")
}

func (s *state) deleteNamespace(ns *namespace) {
	s.Seq++
	s.shrink(nsBytes(ns))
	delete(s.Namespaces, ns.ID)
	s.note(kindNamespace, ns.ID, "")
	s.setTags(ns.ID, nil)
}

// putService adds sv, which must be new and have no instances.
func (s *state) putService(sv *service, code string) error {
	if err := s.grow(svcBytes(sv), code); err != nil {
		return err
	}
	s.Seq++
	if sv.Instances == nil {
		sv.Instances = map[string]*instance{}
	}
	sv.Revision = s.Seq
	s.Services[sv.ID] = sv
	s.note(kindService, sv.ID, "")
	s.note(kindRevision, sv.ID, "")
	return nil
}

// changedService records a change to sv's own fields, old being its size
// before the change; code is the error when the change needs room there
// is not.
func (s *state) changedService(sv *service, old int64, code string) error {
	if err := s.grow(svcBytes(sv)-old, code); err != nil {
		return err
	}
	s.Seq++
	s.note(kindService, sv.ID, "")
	return nil
}

func (s *state) deleteService(sv *service) {
	s.Seq++
	s.shrink(svcBytes(sv))
	delete(s.Services, sv.ID)
	s.note(kindService, sv.ID, "")
	s.setTags(sv.ID, nil)
}

// putInstance adds or replaces an instance of sv and bumps sv's revision.
func (s *state) putInstance(sv *service, in *instance, code string) error {
	old := sv.Instances[in.ID]
	n := instBytes(in)
	if old != nil {
		n -= instBytes(old)
	}
	if err := s.grow(n, code); err != nil {
		return err
	}
	if old != nil && old.RequestID != "" {
		delete(s.reqs, old.RequestID)
	}
	if in.RequestID != "" {
		s.reqs[in.RequestID] = reqRef{sv.ID, in.ID}
	}
	s.Seq++
	sv.Instances[in.ID] = in
	sv.Revision = s.Seq
	s.note(kindInstance, sv.ID, in.ID)
	s.note(kindRevision, sv.ID, "")
	return nil
}

// deleteInstance removes instance id of sv and bumps sv's revision.
func (s *state) deleteInstance(sv *service, id string) {
	old := sv.Instances[id]
	if old == nil {
		return
	}
	if old.RequestID != "" {
		delete(s.reqs, old.RequestID)
	}
	s.Seq++
	s.shrink(instBytes(old))
	delete(sv.Instances, id)
	sv.Revision = s.Seq
	s.note(kindInstance, sv.ID, id)
	s.note(kindRevision, sv.ID, "")
}

// setHealth changes an instance's custom health status. As in AWS, the
// service's InstancesRevision does not move.
func (s *state) setHealth(sv *service, in *instance, unhealthy bool) {
	if in.Unhealthy == unhealthy {
		return
	}
	c := *in
	c.Unhealthy = unhealthy
	s.Seq++
	sv.Instances[in.ID] = &c // a copy: views may hold the old one
	s.note(kindInstance, sv.ID, in.ID)
}

// setTags replaces a resource's tags (nil removes them) after making room.
func (s *state) setTags(id string, tags []tagJSON) {
	old := s.Tags[id]
	if len(old) == 0 && len(tags) == 0 {
		return
	}
	s.size += tagsBytes(tags) - tagsBytes(old)
	if s.budget != nil {
		s.budget.used += tagsBytes(tags) - tagsBytes(old)
	}
	if len(tags) == 0 {
		delete(s.Tags, id)
	} else {
		s.Tags[id] = tags
	}
	s.Seq++
	s.note(kindTags, id, "")
}

// roomForTags checks that tags fit where old ones are now.
func (s *state) roomForTags(id string, tags []tagJSON, code string) error {
	return s.roomFor(tagsBytes(tags)-tagsBytes(s.Tags[id]), code)
}

// roomFor checks, before a change, that n more bytes fit, or fails with
// code. A nil budget always has room.
func (s *state) roomFor(n int64, code string) error {
	if n > 0 && s.budget != nil {
		return s.budget.check(s.size, n, code)
	}
	return nil
}

// resize counts n more bytes (fewer when negative) whose room the caller
// checked, or which a change that frees more needs.
func (s *state) resize(n int64) {
	s.size += n
	if s.budget != nil {
		s.budget.used += n
	}
}

// addOp records an operation, forgetting the oldest beyond max. It counts
// in the state's size: a change that records one checks room for it
// (roomFor with opBytes) before it changes anything, unless it frees more
// than the operation takes.
func (s *state) addOp(op *operation, max int) {
	s.Seq++
	op.Seq = s.Seq
	s.Ops[op.ID] = op
	s.OpOrder = append(s.OpOrder, op.ID)
	s.resize(opBytes(op))
	s.note(kindOperation, op.ID, "")
	for len(s.OpOrder) > max {
		if old := s.Ops[s.OpOrder[0]]; old != nil {
			s.resize(-opBytes(old))
		}
		delete(s.Ops, s.OpOrder[0])
		s.note(kindOperation, s.OpOrder[0], "")
		s.OpOrder = s.OpOrder[1:]
	}
}

// instanceCount is the number of instances in a namespace.
func (s *state) instanceCount(nsID string) int {
	n := 0
	for _, sv := range s.Services {
		if sv.NamespaceID == nsID {
			n += len(sv.Instances)
		}
	}
	return n
}

// reindex rebuilds what is derived from the records: the request index,
// the operations' order and the size.
func (s *state) reindex() {
	s.reqs = map[string]reqRef{}
	s.size = scopeBytes
	for _, ns := range s.Namespaces {
		s.size += nsBytes(ns)
	}
	for _, sv := range s.Services {
		if sv.Instances == nil {
			sv.Instances = map[string]*instance{}
		}
		s.size += svcBytes(sv)
		for _, in := range sv.Instances {
			s.size += instBytes(in)
			if in.RequestID != "" {
				s.reqs[in.RequestID] = reqRef{sv.ID, in.ID}
			}
		}
	}
	for _, t := range s.Tags {
		s.size += tagsBytes(t)
	}
	for _, op := range s.Ops {
		s.size += opBytes(op)
	}
	s.OpOrder = slices.SortedFunc(maps.Keys(s.Ops), func(a, b string) int {
		return int(s.Ops[a].Seq - s.Ops[b].Seq)
	})
}

// cloneAttrs copies an attribute map (nil stays nil).
func cloneAttrs(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}

// eachRecord calls fn with the record of each change in dirty: its field,
// as the Redis store names it in its hashes and log (an instance's is
// i:<service>:<instance>), and its JSON ("" when it was deleted). A
// deleted service's instances are deleted with it, without a call each.
// The Redis and the embedded store both write these records.
func (s *state) eachRecord(dirty map[change]bool, fn func(ch change, field, value string)) {
	for ch := range dirty {
		f := ch.kind + ":" + ch.id
		switch ch.kind {
		case kindNamespace:
			fn(ch, f, marshal(s.Namespaces[ch.id]))
		case kindService:
			fn(ch, f, marshal(s.Services[ch.id]))
		case kindRevision:
			v := ""
			if sv := s.Services[ch.id]; sv != nil {
				v = strconv.FormatInt(sv.Revision, 10)
			}
			fn(ch, f, v)
		case kindInstance:
			sv := s.Services[ch.id]
			if sv == nil {
				continue
			}
			fn(ch, f+":"+ch.sub, marshal(sv.Instances[ch.sub]))
		case kindOperation:
			fn(ch, f, marshal(s.Ops[ch.id]))
		case kindTags:
			v := ""
			if t := s.Tags[ch.id]; len(t) > 0 {
				v = marshal(&t)
			}
			fn(ch, f, v)
		}
	}
}
