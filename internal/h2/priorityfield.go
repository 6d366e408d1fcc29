package h2

import "github.com/dunglas/httpsfv"

// parsePriority reads a priority field value (an RFC 9651 dictionary);
// members it does not know, and u or i of the wrong type or range, are
// ignored. It reports false, with the default, if s is not a dictionary.
// The values browsers send ("u=1", "u=0, i", "i") are read without an
// allocation (parsePriorityCommon); the rest by httpsfv.
func parsePriority(s string, aware bool) (priority, bool) {
	p := defaultPriority(aware)
	if s == "" {
		return p, true // an empty dictionary, without parsing one
	}
	if p, ok := parsePriorityCommon(s, p); ok {
		return p, true
	}
	return parsePriorityDictionary(s, p)
}

// parsePriorityDictionary is parsePriority for any value, through
// httpsfv; p is the default.
func parsePriorityDictionary(s string, p priority) (priority, bool) {
	d, err := httpsfv.UnmarshalDictionary([]string{s})
	if err != nil {
		return p, false
	}
	if u, ok := dictItem[int64](d, "u"); ok && u >= 0 && u <= 7 {
		p.urgency = uint8(u)
	}
	if i, ok := dictItem[bool](d, "i"); ok {
		p.incremental = i
	}
	return p, true
}

// dictItem is the value of the item key names in d, if it is one of
// type T.
func dictItem[T any](d *httpsfv.Dictionary, key string) (T, bool) {
	var zero T
	m, ok := d.Get(key)
	if !ok {
		return zero, false
	}
	it, ok := m.(httpsfv.Item)
	if !ok {
		return zero, false
	}
	v, ok := it.Value.(T)
	return v, ok
}

// parsePriorityCommon reads s if it is a dictionary of the shape clients
// send: members u=D (one digit) and i, i=?1 or i=?0, with no parameters,
// separated by a comma and any number of spaces. It reports false for
// anything else, which parsePriorityDictionary reads; p is the default.
// As in a dictionary, the last member of a key counts: "u=2, u=9" has the
// out-of-range urgency 9, ignored, so the default stays.
func parsePriorityCommon(s string, p priority) (priority, bool) {
	urgency := -1
	for {
		switch {
		case len(s) >= 3 && s[0] == 'u' && s[1] == '=' && '0' <= s[2] && s[2] <= '9':
			urgency, s = int(s[2]-'0'), s[3:]
		case len(s) >= 4 && s[0] == 'i' && s[1] == '=' && s[2] == '?' && (s[3] == '0' || s[3] == '1'):
			p.incremental, s = s[3] == '1', s[4:]
		case len(s) >= 1 && s[0] == 'i' && (len(s) == 1 || s[1] == ','):
			p.incremental, s = true, s[1:]
		default:
			return p, false
		}
		if s == "" {
			break
		}
		if s[0] != ',' {
			return p, false
		}
		s = s[1:]
		for s != "" && s[0] == ' ' {
			s = s[1:]
		}
		if s == "" {
			return p, false // a trailing comma: not a dictionary
		}
	}
	if 0 <= urgency && urgency <= 7 {
		p.urgency = uint8(urgency)
	}
	return p, true
}
