package gateway

// The batch decoder's fast path. Nearly every batch is plain JSON: known
// members once each, strings of printable ASCII with no escapes, tokens a
// small integer. scan reads such a body in one pass over its bytes, with
// none of jsontext's per-token bookkeeping, and gives up on anything else
// (an escape, a non-ASCII byte, null, a duplicate or unknown member, a
// number that is not a plain integer, a take over the bound, a syntax
// error), leaving the body to the full decoder, which alone reports
// errors. Where scan succeeds it leaves exactly what the full decoder
// would (FuzzBatchDecoder checks it).

// scanner is a position in a body.
type scanner struct {
	buf []byte
	i   int
}

// Member bits, to find a duplicate member in one object.
const (
	seenService = 1 << iota
	seenAccount
	seenRegion
	seenAction
	seenCategory
	seenTokens
	seenRequests
)

// scan decodes body as decode would and reports true, or reports false
// when the body needs the full decoder; either way it may have changed
// the decoder's results, which decode resets.
func (b *batchDecoder) scan(body []byte, maxItems int) bool {
	b.arena, b.items, b.top, b.sawReq = b.arena[:0], b.items[:0], rawTake{}, false
	s := scanner{buf: body}
	if !s.lit('{') {
		return false
	}
	if s.lit('}') {
		return s.end()
	}
	seen := 0
	for {
		name, ok := s.str()
		if !ok || !s.lit(':') {
			return false
		}
		var bit int
		switch string(name) {
		case "service":
			bit, ok = seenService, b.scanStr(&s, &b.top.service)
		case "account":
			bit, ok = seenAccount, b.scanStr(&s, &b.top.account)
		case "region":
			bit, ok = seenRegion, b.scanStr(&s, &b.top.region)
		case "requests":
			b.sawReq = true
			bit, ok = seenRequests, b.scanRequests(&s, maxItems)
		}
		if bit == 0 || !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if s.lit(',') {
			continue
		}
		return s.lit('}') && s.end()
	}
}

// scanRequests reads the list of takes.
func (b *batchDecoder) scanRequests(s *scanner, maxItems int) bool {
	if !s.lit('[') {
		return false
	}
	if s.lit(']') {
		return true
	}
	for {
		if maxItems > 0 && len(b.items) == maxItems {
			return false
		}
		var t rawTake
		if !b.scanTake(s, &t) {
			return false
		}
		b.items = append(b.items, t)
		if s.lit(',') {
			continue
		}
		return s.lit(']')
	}
}

// scanTake reads one take object.
func (b *batchDecoder) scanTake(s *scanner, t *rawTake) bool {
	if !s.lit('{') {
		return false
	}
	if s.lit('}') {
		return true
	}
	seen := 0
	for {
		name, ok := s.str()
		if !ok || !s.lit(':') {
			return false
		}
		var bit int
		switch string(name) {
		case "service":
			bit, ok = seenService, b.scanStr(s, &t.service)
		case "account":
			bit, ok = seenAccount, b.scanStr(s, &t.account)
		case "region":
			bit, ok = seenRegion, b.scanStr(s, &t.region)
		case "action":
			bit, ok = seenAction, b.scanStr(s, &t.action)
		case "category":
			bit, ok = seenCategory, b.scanStr(s, &t.category)
		case "tokens":
			bit = seenTokens
			t.tokens, ok = s.int()
			t.hasTokens = true
		}
		if bit == 0 || !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if s.lit(',') {
			continue
		}
		return s.lit('}')
	}
}

// scanStr reads a plain string into the arena.
func (b *batchDecoder) scanStr(s *scanner, dst *span) bool {
	v, ok := s.str()
	if !ok {
		return false
	}
	off := len(b.arena)
	b.arena = append(b.arena, v...)
	*dst = span{int32(off), int32(len(b.arena))}
	return true
}

// space skips JSON whitespace.
func (s *scanner) space() {
	for s.i < len(s.buf) {
		switch s.buf[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// lit skips whitespace and the byte c, reporting whether c was there.
func (s *scanner) lit(c byte) bool {
	s.space()
	if s.i < len(s.buf) && s.buf[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.buf)
}

// str reads a string of printable ASCII without escapes, which is its own
// unquoted value.
func (s *scanner) str() ([]byte, bool) {
	s.space()
	if s.i >= len(s.buf) || s.buf[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.buf); j++ {
		switch c := s.buf[j]; {
		case c == '"':
			s.i = j + 1
			return s.buf[start:j], true
		case c < 0x20 || c == '\\' || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// int reads an integer of at most 18 digits, in JSON's form (no leading
// zero, no fraction or exponent).
func (s *scanner) int() (int64, bool) {
	s.space()
	j := s.i
	neg := j < len(s.buf) && s.buf[j] == '-'
	if neg {
		j++
	}
	start := j
	var v int64
	for j < len(s.buf) && s.buf[j] >= '0' && s.buf[j] <= '9' {
		v = v*10 + int64(s.buf[j]-'0')
		j++
	}
	if n := j - start; n == 0 || n > 18 || (n > 1 && s.buf[start] == '0') {
		return 0, false
	}
	if j < len(s.buf) && (s.buf[j] == '.' || s.buf[j] == 'e' || s.buf[j] == 'E') {
		return 0, false
	}
	if neg {
		v = -v
	}
	s.i = j
	return v, true
}
