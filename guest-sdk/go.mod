module github.com/berthhq/berth/guest-sdk

go 1.26

replace github.com/berthhq/berth/wasm/abi => ../wasm/abi

require github.com/berthhq/berth/wasm/abi v0.0.0-00010101000000-000000000000
