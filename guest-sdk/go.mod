module github.com/berthhq/berth/guest-sdk

go 1.26

replace github.com/berthhq/berth/wasm/abi => ../wasm/abi
