// The JSON object view fuzz-core reads the broker's frames with: the one fuzz-decoder uses
// too, in Fuzz/FuzzJSONView. A name only; the checks are in Session+Frames.swift.
import FuzzJSONView

/// A body the broker wrote, as a JSON object: keys in order, first occurrences raw and as trees.
typealias FrameView = JSONObjectView
