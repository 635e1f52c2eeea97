package g2o

import (
	"math"
	"strconv"
)

// Reading numbers without strconv's generality. A g2o file is mostly
// numbers, and strconv.ParseFloat, which must accept every syntax Go does
// (hexadecimal, underscores, infinities, 800-digit mantissas), spends most
// of its time deciding which one it has. fastNumbers reads the short
// forms that files print; a record with anything else is read field by
// field with strconv, so what is accepted, the values and the errors are
// strconv's.

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// fastNumbers reads the current record's ids ids (at most 2) and nv
// numbers straight from the text after its tag (p.rest), into p.ids and
// p.vals, and reports true, when there are exactly that many fields and
// each is what the field-by-field reading accepts (strconv.ParseInt for
// an id, within maxID; strconv.ParseFloat for a number, finite), with
// the same values. Otherwise it reports false, having changed nothing
// that the field-by-field reading relies on: that reading then finds the
// problem and reports it.
//
// It is one loop over the bytes, with no calls for the forms that files
// print, because it reads most of a file: split, then strconv field by
// field, took three times as long. An id of at most 18 digits is read as
// it goes; so is a number [+-]digits[.digits][(e|E)[+-]digits] (digits on
// at least one side of the point, at most 19 in all, at most 4 in the
// exponent) with value m * 10^e, m < 2^53 an integer and |e| <= 22. Both
// factors of such a number are exact doubles, and one multiplication or
// division rounds their product correctly, so the value is bit for bit
// strconv.ParseFloat's (Clinger's fast path). strconv reads any other
// field (the 17 digits writers print to round-trip a double, say).
func (p *parser) fastNumbers(ids, nv int) bool {
	b := p.rest
	if ids > len(p.ids) || nv > len(p.vals) {
		return false
	}
	var idv [2]int64
	i := 0
	// sep skips the separators before a field; false: there are none, or
	// no field follows.
	sep := func() bool {
		if uint(i) >= uint(len(b)) || !isSpace[b[i]] {
			return false
		}
		for i++; uint(i) < uint(len(b)) && isSpace[b[i]]; i++ {
		}
		return uint(i) < uint(len(b))
	}
	for t := range idv[:ids] {
		if !sep() {
			return false
		}
		field := i
		neg := b[i] == '-'
		if neg {
			i++
		}
		start := i
		var v int64
		for ; uint(i) < uint(len(b)); i++ {
			c := b[i] - '0'
			if c > 9 {
				break
			}
			v = v*10 + int64(c)
		}
		if neg {
			v = -v
		}
		if digits := i - start; digits == 0 || digits > 18 || (uint(i) < uint(len(b)) && !isSpace[b[i]]) {
			// Not a short id: strconv reads this field.
			for i = start; uint(i) < uint(len(b)) && !isSpace[b[i]]; i++ {
			}
			var err error
			if v, err = strconv.ParseInt(string(b[field:i]), 10, 64); err != nil {
				return false
			}
		}
		if v > maxID || v < -maxID {
			return false
		}
		idv[t] = v
	}
	vals := p.vals[:nv]
	for t := range vals {
		if !sep() {
			return false
		}
		field := i
		neg := b[i] == '-'
		if neg || b[i] == '+' {
			i++
		}
		start := i
		var m uint64
		for ; uint(i) < uint(len(b)); i++ {
			c := b[i] - '0'
			if c > 9 {
				break
			}
			m = m*10 + uint64(c)
		}
		digits, exp := i-start, 0
		if uint(i) < uint(len(b)) && b[i] == '.' {
			i++
			frac := i
			for ; uint(i) < uint(len(b)); i++ {
				c := b[i] - '0'
				if c > 9 {
					break
				}
				m = m*10 + uint64(c)
			}
			exp = frac - i
			digits += i - frac
		}
		// At most 19 digits, leading zeros included, cannot overflow m.
		short := 0 < digits && digits <= 19
		if short && uint(i) < uint(len(b)) && b[i]|0x20 == 'e' {
			i++
			eneg := false
			if uint(i) < uint(len(b)) && (b[i] == '-' || b[i] == '+') {
				eneg = b[i] == '-'
				i++
			}
			es, e := i, 0
			for ; uint(i) < uint(len(b)) && i-es < 4; i++ {
				c := b[i] - '0'
				if c > 9 {
					break
				}
				e = e*10 + int(c)
			}
			short = i > es
			if eneg {
				e = -e
			}
			exp += e
		}
		var v float64
		if short && m < 1<<53 && -22 <= exp && exp <= 22 && (uint(i) >= uint(len(b)) || isSpace[b[i]]) {
			v = float64(m)
			if exp < 0 {
				v /= pow10[-exp]
			} else {
				v *= pow10[exp]
			}
			if neg {
				v = -v
			}
		} else {
			// Not a short number (writers print 17 digits to round-trip):
			// strconv reads this field.
			for i = start; uint(i) < uint(len(b)) && !isSpace[b[i]]; i++ {
			}
			var err error
			if v, err = strconv.ParseFloat(string(b[field:i]), 64); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
		vals[t] = v
	}
	for ; uint(i) < uint(len(b)); i++ {
		if !isSpace[b[i]] {
			return false // another field, or a byte no field may hold
		}
	}
	for t, v := range idv[:ids] {
		p.ids[t] = int(v)
		p.noteID(int(v))
	}
	return true
}
