extension RandomAccessCollection {
    /// In a collection in order, the first index whose element does not sort before the one
    /// sought (`before` says whether an element does): a search by halves. `endIndex` when all do.
    func lowerBound(_ before: (Element) -> Bool) -> Index {
        var low = startIndex, high = endIndex
        while low < high {
            let mid = index(low, offsetBy: distance(from: low, to: high) / 2)
            if before(self[mid]) { low = index(after: mid) } else { high = mid }
        }
        return low
    }
}
