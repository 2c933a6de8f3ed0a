#!/usr/bin/env python3
"""callgrind_profile.py - where the instructions of one microbench operation go.

    KEEP=/tmp/cg Benchmarks/callgrind.sh 20000
    python3 Benchmarks/callgrind_profile.py /tmp/cg/callgrind.out.core-invoke.20000 \\
        /tmp/cg/callgrind.out.core-invoke.0 20000 [TOP] [--other]

N may also be calls:REGEX: the operations are then the extra calls of the functions whose
mangled name matches REGEX (Benchmarks/callgrind-broker.sh uses calls:handleReturn).

Takes the self cost (Ir) of every function in a callgrind run of N operations and in one
of 0 (same set-up and warm-up), divides the difference by N, demangles the Swift names,
and prints the top functions and the share of each category (JSON scanner, field checks
(the decoder's own work, the direct path's included),
retain/release, allocation, hashing, frame building, copies, core logic). Reads files,
prints figures; it changes nothing and asserts nothing.
"""

import re
import subprocess
import sys

# First match wins; patterns are tried on the demangled name and the object file.
CATEGORIES = [
    ("bench driver", r"CountingFrame|CoreDriver|runCoreInvoke|runPing|runChain3|runValidate64k"),
    (
        "generic metadata (runtime)",
        r"getGenericMetadata|getCache\(|LockingConcurrentMap|ConcurrentReadableHashMap|"
        r"MetadataCacheEntryBase|AtomicWaitQueue|__swift_instantiate|"
        r"getContiguousArrayStorageType|swift_isClassType|tuple_initializeWithCopy|"
        r"swift_initStaticObject|swift_getTypeByMangledName|swift_once",
    ),
    (
        "enum/struct copies and destroys",
        r"^destroy for|initializeWithCopy for|initializeWithTake for|"
        r"outlined init with (copy|take)|outlined destroy|getEnumTag|"
        r"assignWithCopy for|storeEnumTag|outlined enum get tag",
    ),
    (
        "retain/release",
        r"swift_(retain|release|bridgeObject(Retain|Release)|unknownObject(Retain|Release)|"
        r"isUniquelyReferenced|nonatomic_re)|RefCounts|swift_arrayDestroy|swift_arrayInitWithCopy|"
        r"outlined (copy|consume|destroy|retain|release)|value witness|\bWOe\b|\bWOy\b|\bWOh\b",
    ),
    (
        "allocation",
        r"\bmalloc\b|_int_malloc|_int_free|\bfree\b|malloc_consolidate|unlink_chunk|tcache|"
        r"swift_(allocObject|slowAlloc|deallocClassInstance|deallocObject|slowDealloc|deallocUninitialized)|"
        r"_allocateUninitialized|_allocateBuffer|ContiguousArrayBuffer\.init|"
        r"_copyToNewBuffer|_growArrayCapacity|reserveCapacity|createNativeStorage|cfree|memalign|"
        r"malloc_usable_size|_consumeAndCreateNew|__deallocating_deinit|_copyCollectionToContiguousArray",
    ),
    (
        "String creation",
        r"_uncheckedFromUTF8|_allASCII|_fromUTF8Repairing|String\.init\(decoding|"
        r"_StringGuts\.init|_SmallString|validateUTF8",
    ),
    ("JSON scanner", r"JSONScanner|parseInt64|skipValue|skipScalar|scanObjectMembers"),
    (
        "field checks",
        r"FieldView|FrameFields|PackedName|FieldName|OpName|checkFields|requestFields|answerFields|MessageDecoder|"
        r"DirectFrame|_stringCompare|"
        r"\bmemcmp|__memcmp|==|StaticString|isValid|_findStringSwitchCase",
    ),
    (
        "hashing/dictionaries",
        r"Hasher|_RawDictionaryStorage|_NativeDictionary|_NativeSet|Dictionary|Set<|"
        r"hashValue|hash\(into|_rawHashValue|Set\._Variant",
    ),
    (
        "frame building",
        r"FrameBuilder|FrameCursor|EventFrame|JSONWriter|FrameHeader|OutboundFrame|OutputStore|ReplyResult|PostReply|"
        r"StatusPageWriter|appendInterpolation|_StringGuts\.append|"
        r"String\.append|Array\.append|_appendElement|replaceSubrange",
    ),
    ("copies (memcpy/memmove)", r"memcpy|memmove|memset"),
    (
        "transport (libevent, syscalls, NotifBusTransport)",
        r"NotifBusTransport|BrokerServer|Connection\.|EventLoop|Listener|\bevent_|evbuffer|evmap|epoll|^__?libc_|"
        r"\b(read|write|send|recv|sendmsg|recvmsg|writev|readv|__send|__recv|__read|__write|clock_gettime|"
        r"__clock_gettime|gettimeofday)\b|timeout_process|evutil|bufferevent|min_heap|event_base",
    ),
    ("core logic", r"NotifBusCore|Broker"),
]


# Stages of the per-frame path, shown with their inclusive cost (callees included).
STAGES = [
    (
        "decode (MessageDecoder.decode: scan + field checks + typed message)",
        r"^(specialized )?static MessageDecoder\.decode\(_:\)$",
    ),
    (
        "DirectFrame.decode (the direct path: scan + fields + typed frame)",
        r"^(specialized )?DirectFrame\.decode\(_:\)$",
    ),
    ("Broker.receiveFrame (decode + dispatch + frames out)", r"^Broker\.receive(Frame)?\(_:from:now:into:\)$"),
    ("Broker.handle (request dispatch)", r"^Broker\.handle\(_:id:from:now:\)$"),
    ("Broker.handleAnswer (next/complete/stop)", r"^Broker\.handleAnswer\(_:from:now:\)$"),
    ("Broker.handleReturn (return)", r"^Broker\.handleReturn\(_:from:\)$"),
    ("FrameBuilder.finish (frame out)", r"^FrameBuilder\.finish\(\)$"),
    ("Broker.takeActions", r"^Broker\.takeActions\(swappingWith:\)$"),
]


def self_costs(path, inclusive=False):
    """{function: Ir} from callgrind_annotate, self (or inclusive) cost, every function."""
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--inclusive=" + ("yes" if inclusive else "no"), "--auto=no", path],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    costs = {}
    started = False
    for line in out.splitlines():
        if "file:function" in line:
            started = True
            continue
        if not started:
            continue
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(.*)$", line)
        if not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        name = m.group(2)
        fn = name.split(":", 1)[1] if ":" in name else name
        fn = re.sub(r" \[[^\]]*\]$", "", fn)
        # A function's lines can sit in several files: self costs add up, while each inclusive
        # entry already holds the callees, so the largest one is the function's.
        costs[fn] = max(costs.get(fn, 0), ir) if inclusive else costs.get(fn, 0) + ir
    return costs


def calls(path, pattern):
    """How many calls the profile records to functions whose (mangled) name matches pattern."""
    names, total, current = {}, 0, None
    with open(path, errors="replace") as fh:
        for line in fh:
            m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", line)
            if m:
                if m.group(3):
                    names[m.group(2)] = m.group(3).strip()
                current = names.get(m.group(2), "") if m.group(1) == "cfn" else None
            elif line.startswith("calls=") and current is not None and re.search(pattern, current):
                total += int(line[6:].split()[0])
    return total


def demangle(names):
    try:
        out = subprocess.run(
            ["swift", "demangle", "--simplified", "--compact"],
            input="\n".join(names),
            check=True,
            capture_output=True,
            text=True,
        ).stdout.splitlines()
        if len(out) == len(names):
            return dict(zip(names, out))
    except (OSError, subprocess.CalledProcessError):
        pass
    return {n: n for n in names}


def category(name):
    for label, pattern in CATEGORIES:
        if re.search(pattern, name):
            return label
    return "other"


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    with_n, with_0, per = sys.argv[1], sys.argv[2], sys.argv[3]
    if per.startswith("calls:"):
        # Operations counted by the calls of one function, for runs whose count is not known
        # in advance (the broker under notifbus-bench).
        n = calls(with_n, per[6:]) - calls(with_0, per[6:])
        print("operations: %d more calls of /%s/ in the first run" % (n, per[6:]))
        if n <= 0:
            sys.exit("callgrind_profile.py: the first run must make more calls than the second")
    else:
        n = int(per)
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 25
    show_other = "--other" in sys.argv
    a, b = self_costs(with_n), self_costs(with_0)
    delta = {f: (a.get(f, 0) - b.get(f, 0)) / n for f in set(a) | set(b)}
    delta = {f: v for f, v in delta.items() if abs(v) >= 0.5}
    names = demangle(sorted(delta))
    total = sum(delta.values())
    print("instructions per operation: %.0f (self cost, functions above callgrind_annotate's threshold)" % total)
    print("\ntop functions (instructions per operation, share):")
    for f, v in sorted(delta.items(), key=lambda kv: -kv[1])[:top]:
        shown = names[f]
        if len(shown) > 150:
            shown = shown[:147] + "..."
        print("  %7.0f  %5.1f%%  %-22s %s" % (v, 100 * v / total, category(names[f]), shown))
    by = {}
    for f, v in delta.items():
        c = category(names[f])
        by[c] = by.get(c, 0) + v
    if show_other:
        print("\nuncategorised:")
        for f, v in sorted(delta.items(), key=lambda kv: -kv[1]):
            if category(names[f]) == "other":
                print("  %7.0f  %s" % (v, names[f][:150]))
    ai, bi = self_costs(with_n, True), self_costs(with_0, True)
    inc = {f: (ai.get(f, 0) - bi.get(f, 0)) / n for f in set(ai) | set(bi)}
    inc_names = demangle(sorted(inc))
    print("\nstages, inclusive (instructions per operation):")
    for label, pattern in STAGES:
        v = max([x for f, x in inc.items() if re.search(pattern, inc_names[f])] or [0])
        if v >= 1:
            print("  %7.0f  %5.1f%%  %s" % (v, 100 * v / total, label))
    print("\nby category:")
    for c, v in sorted(by.items(), key=lambda kv: -kv[1]):
        print("  %7.0f  %5.1f%%  %s" % (v, 100 * v / total, c))


if __name__ == "__main__":
    main()
