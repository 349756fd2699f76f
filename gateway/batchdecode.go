package gateway

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
)

// The batch endpoint decodes its body token by token with jsontext rather
// than into []TakeRequest: a batch of 100 would otherwise allocate some 600
// strings, and decoding would be most of the cost of a decision. Strings
// are unquoted into one arena that becomes a single string, and every field
// is a substring of it. The rules are those of decodeStrict on a
// BatchRequest (unknown or duplicate members are errors, null means
// absent), which a differential fuzz test checks.

// span is a field's place in the arena; an empty span is an absent (or
// empty) field.
type span struct{ off, end int32 }

// rawTake is one take as the decoder found it.
type rawTake struct {
	service, account, region, action, category span
	tokens                                     int64
	hasTokens                                  bool
}

// batchDecoder holds the reusable state of one batch request, decoding
// and answering; get one from batchDecoders.
type batchDecoder struct {
	dec    *jsontext.Decoder
	arena  []byte
	name   []byte
	top    rawTake
	items  []rawTake
	sawReq bool
	// maxItems bounds the takes of a batch; 0 means no bound.
	maxItems int

	// Scratch for serveBatch, kept between requests.
	body     bytes.Buffer
	resolved []resolved
	reqs     []limiter.Request
	keyEnds  []int
	keyBuf   []byte
	out      []bucket.Decision
	answer   []byte
	kinds    []takeKind
	frags    resultFrags
}

// maxPooledBytes bounds the scratch a pooled decoder keeps, so one huge
// batch does not pin its buffers for ever. It holds a body of the default
// 1 MiB limit (plus bytes.MinRead), so that maximum-size batches reuse
// their buffers rather than allocate them anew.
const maxPooledBytes = 2 << 20

func putBatchDecoder(b *batchDecoder) {
	if cap(b.arena) > maxPooledBytes || b.body.Cap() > maxPooledBytes || cap(b.answer) > maxPooledBytes || cap(b.keyBuf) > maxPooledBytes {
		return
	}
	clear(b.resolved) // drop references into the last request's strings
	clear(b.reqs)
	clear(b.kinds)
	b.kinds = b.kinds[:0]
	b.frags.reset()
	batchDecoders.Put(b)
}

var batchDecoders = sync.Pool{New: func() any {
	return &batchDecoder{dec: jsontext.NewDecoder(new(bytes.Buffer))}
}}

// decode reads a BatchRequest body of at most maxItems takes (0: no
// limit). On success the arena holds every string, and request gives the
// takes. Decoding stops at the first take over the limit.
func (b *batchDecoder) decode(body []byte, maxItems int) error {
	b.maxItems = maxItems
	if b.scan(body, maxItems) {
		return nil
	}
	return b.decodeFull(body)
}

// decodeFull is decode with jsontext, for any body: the only path that
// reports errors.
func (b *batchDecoder) decodeFull(body []byte) error {
	// From a bytes.Buffer the decoder reads the body in place; from any
	// other reader it would copy it into a buffer of its own, growing to
	// twice the body.
	b.dec.Reset(bytes.NewBuffer(body))
	b.arena, b.items, b.top, b.sawReq = b.arena[:0], b.items[:0], rawTake{}, false
	if err := b.object(func(name []byte) error {
		if string(name) == "requests" {
			b.sawReq = true
			return b.requests()
		}
		return b.takeField(&b.top, name, false)
	}); err != nil {
		return err
	}
	if _, err := b.dec.ReadToken(); err != io.EOF {
		return &fieldError{"", "malformed JSON: more than one value in the body"}
	}
	return nil
}

// object reads one JSON object, calling member for each member name with
// the decoder positioned at its value.
func (b *batchDecoder) object(member func(name []byte) error) error {
	if err := b.expect('{', "an object"); err != nil {
		return err
	}
	for b.dec.PeekKind() != '}' {
		v, err := b.dec.ReadValue() // the member name (or a syntax error)
		if err != nil {
			return b.syntax(err)
		}
		if b.name, err = jsontext.AppendUnquote(b.name[:0], v); err != nil {
			return b.syntax(err)
		}
		if err := member(b.name); err != nil {
			return err
		}
	}
	_, err := b.dec.ReadToken()
	return b.syntax(err)
}

func (b *batchDecoder) requests() error {
	if b.dec.PeekKind() == 'n' {
		b.sawReq = false
		_, err := b.dec.ReadToken()
		return b.syntax(err)
	}
	if err := b.expect('[', "a list"); err != nil {
		return err
	}
	for b.dec.PeekKind() != ']' {
		if b.maxItems > 0 && len(b.items) == b.maxItems {
			return &fieldError{"requests", "more than " + strconv.Itoa(b.maxItems) + " takes: a batch holds at most " + strconv.Itoa(b.maxItems)}
		}
		var t rawTake
		if b.dec.PeekKind() == 'n' { // a null item: a take with nothing set
			if _, err := b.dec.ReadToken(); err != nil {
				return b.syntax(err)
			}
		} else if err := b.object(func(name []byte) error { return b.takeField(&t, name, true) }); err != nil {
			return err
		}
		b.items = append(b.items, t)
	}
	_, err := b.dec.ReadToken()
	return b.syntax(err)
}

// takeField reads the value of one member of a take (item) or of the
// batch's top level (!item, where only the shared fields are known).
func (b *batchDecoder) takeField(t *rawTake, name []byte, item bool) error {
	switch string(name) {
	case "service":
		return b.str(&t.service)
	case "account":
		return b.str(&t.account)
	case "region":
		return b.str(&t.region)
	case "action":
		if item {
			return b.str(&t.action)
		}
	case "category":
		if item {
			return b.str(&t.category)
		}
	case "tokens":
		if item {
			return b.int(t)
		}
	}
	return unknownMember(b.dec.StackPointer())
}

// str reads a string (or null) into the arena.
func (b *batchDecoder) str(dst *span) error {
	v, err := b.dec.ReadValue()
	if err != nil {
		return b.syntax(err)
	}
	switch v.Kind() {
	case 'n':
		*dst = span{}
		return nil
	case '"':
		off := len(b.arena)
		if b.arena, err = jsontext.AppendUnquote(b.arena, v); err != nil {
			return b.syntax(err)
		}
		*dst = span{int32(off), int32(len(b.arena))}
		return nil
	}
	return &fieldError{pointerField(b.dec.StackPointer()), "want a string, got JSON " + v.Kind().String()}
}

// int reads the tokens count (or null).
func (b *batchDecoder) int(t *rawTake) error {
	v, err := b.dec.ReadValue()
	if err != nil {
		return b.syntax(err)
	}
	switch v.Kind() {
	case 'n':
		t.tokens, t.hasTokens = 0, false
		return nil
	case '0':
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err == nil {
			t.tokens, t.hasTokens = n, true
			return nil
		}
	}
	return &fieldError{pointerField(b.dec.StackPointer()), "want a whole number, got JSON " + string(v)}
}

func (b *batchDecoder) expect(kind jsontext.Kind, what string) error {
	if k := b.dec.PeekKind(); k != kind {
		if k == 0 { // a syntax error: let ReadToken report it
			_, err := b.dec.ReadToken()
			return b.syntax(err)
		}
		return &fieldError{pointerField(b.dec.StackPointer()), "want " + what + ", got JSON " + k.String()}
	}
	_, err := b.dec.ReadToken()
	return b.syntax(err)
}

// syntax turns a decoder error into a field error, or returns nil.
func (b *batchDecoder) syntax(err error) error {
	if err == nil {
		return nil
	}
	var synErr *jsontext.SyntacticError
	if errors.As(err, &synErr) {
		return &fieldError{pointerField(synErr.JSONPointer), "malformed JSON at byte " + strconv.FormatInt(synErr.ByteOffset, 10) + ": " + awsjson.ClipMessage(synErr.Err.Error())}
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &fieldError{pointerField(b.dec.StackPointer()), "malformed JSON: unexpected end of input"}
	}
	return &fieldError{"", "malformed JSON: " + awsjson.ClipMessage(err.Error())}
}

// request returns item i as a TakeRequest, its strings substrings of all
// (the arena as one string), with the batch's shared fields filled in.
func (b *batchDecoder) request(all string, t *rawTake) TakeRequest {
	get := func(s span, shared span) string {
		if s.off == s.end { // absent or "": the batch's shared value
			s = shared
		}
		return all[s.off:s.end]
	}
	req := TakeRequest{
		Service:  get(t.service, b.top.service),
		Account:  get(t.account, b.top.account),
		Region:   get(t.region, b.top.region),
		Action:   all[t.action.off:t.action.end],
		Category: all[t.category.off:t.category.end],
	}
	if t.hasTokens {
		req.Tokens = &t.tokens
	}
	return req
}
