import AssetPatchCore
print("hi")
