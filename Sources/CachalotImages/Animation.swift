import Foundation

/// The frames of an animated image (GIF, WebP), each composited as it is shown, with how long it
/// shows. See ``ImageDecoder/decodeAnimation(_:)``.
public struct Animation: Sendable, Hashable {
    /// A frame: the whole canvas as it is shown, and for how long.
    public struct Frame: Sendable, Hashable {
        /// The whole canvas as this frame shows it, composited over the frames before it as the
        /// format's disposal and blending rules say; `.rgba8`.
        public let bitmap: Bitmap
        /// How long it shows. A GIF frame that asks for 0 or 10 ms shows for 100 ms, as in
        /// browsers.
        public let duration: Duration

        /// Makes a frame of `bitmap` that shows for `duration`.
        ///
        /// - Parameters:
        ///   - bitmap: The whole canvas as the frame shows it.
        ///   - duration: How long it shows; kept as given.
        public init(bitmap: Bitmap, duration: Duration) {
            self.bitmap = bitmap
            self.duration = duration
        }
    }

    /// At least one frame.
    public let frames: [Frame]
    /// How many times the animation plays; 0 for ever.
    public let loopCount: Int

    /// Makes an animation of `frames`, played `loopCount` times.
    ///
    /// - Parameters:
    ///   - frames: The frames in the order they show.
    ///   - loopCount: How many times the animation plays; 0 for ever.
    /// - Precondition: `frames` is not empty.
    public init(frames: [Frame], loopCount: Int) {
        precondition(!frames.isEmpty, "an animation has at least one frame")
        self.frames = frames
        self.loopCount = loopCount
    }

    /// The memory its frames hold: the sum of their ``Bitmap/cost``.
    public var cost: Int { self.frames.reduce(0) { $0 + $1.bitmap.cost } }

    /// How long one play of every frame takes.
    public var duration: Duration { self.frames.reduce(.zero) { $0 + $1.duration } }
}
