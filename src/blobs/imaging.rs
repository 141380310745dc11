//! Image processing on upload: validate by decoding, refuse decompression bombs from the header,
//! shrink oversized images, and make a thumbnail. All of it runs on the blocking pool.

use std::io::Cursor;

use image::codecs::gif::GifDecoder;
use image::codecs::jpeg::{JpegDecoder, JpegEncoder};
use image::codecs::png::PngDecoder;
use image::codecs::webp::WebPDecoder;
use image::imageops::FilterType;
use image::metadata::Orientation;
use image::{DynamicImage, ImageDecoder, ImageError, ImageFormat, Limits};

use super::{BlobError, Kind};

/// JPEG quality for resized images and thumbnails: visually lossless for photos, a fraction of the
/// size.
const JPEG_QUALITY: u8 = 85;

/// Image processing on upload (off the async threads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimits {
    /// Whether to shrink images whose longest side is over `max_side`.
    pub resize: bool,
    /// The longest side of a stored image when `resize` is on.
    pub max_side: u32,
    /// The longest side of a thumbnail.
    pub thumb_side: u32,
    /// Images with more pixels are refused before their pixels are decoded.
    pub max_pixels: u64,
}

impl Default for ImageLimits {
    fn default() -> Self {
        ImageLimits { resize: true, max_side: 1920, thumb_side: 320, max_pixels: 50_000_000 }
    }
}

/// The server-wide gate on image decoding.
fn decoders() -> &'static tokio::sync::Semaphore {
    static DECODERS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    DECODERS.get_or_init(|| {
        tokio::sync::Semaphore::new(std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
    })
}

/// A processed image, ready to be stored.
pub struct Prepared {
    /// The image to store: resized (longest side ≤ `max_side`; PNG stays PNG, JPEG stays JPEG, WebP
    /// becomes JPEG or PNG with alpha, a still GIF becomes PNG), or the original bytes unchanged
    /// when resizing is off, the image is small enough, or it is a GIF or animated WebP (resizing
    /// would drop the animation).
    pub main: Vec<u8>,
    /// What `main` is.
    pub main_kind: Kind,
    /// PNG (with alpha) or JPEG, longest side ≤ `thumb_side`; `None` when `main` is that small already.
    pub thumbnail: Option<Vec<u8>>,
    /// The width of `main` as displayed (after its EXIF orientation).
    pub width: u32,
    /// The height of `main` as displayed (after its EXIF orientation).
    pub height: u32,
}

/// Sizes only: the bytes are user content and must not end up in logs.
impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("main_len", &self.main.len())
            .field("main_kind", &self.main_kind)
            .field("thumbnail_len", &self.thumbnail.as_ref().map(Vec::len))
            .field("width", &self.width)
            .field("height", &self.height)
            .finish()
    }
}

/// Validates, resizes and thumbnails an uploaded image. Only for raster kinds (anything else is
/// [`BlobError::BadImage`]); a corrupt image is [`BlobError::BadImage`], one with more than
/// `max_pixels` pixels is [`BlobError::ImageTooLarge`], decided from the header alone.
pub async fn prepare_image(bytes: Vec<u8>, kind: Kind, limits: &ImageLimits) -> Result<Prepared, BlobError> {
    let limits = *limits;
    // A decode may take hundreds of MB and a core for a while: no more run at once than the
    // machine has cores, whoever sent them (SECURITY.md 54); the rest wait their turn.
    let _permit = decoders().acquire().await.map_err(|_| BlobError::BadImage)?;
    match tokio::task::spawn_blocking(move || prepare(bytes, kind, &limits)).await {
        Ok(result) => result,
        // A decoder that panics on hostile input means a bad image, not a failed request.
        Err(_) => Err(BlobError::BadImage),
    }
}

fn prepare(bytes: Vec<u8>, kind: Kind, limits: &ImageLimits) -> Result<Prepared, BlobError> {
    // PNG decoders read up to the first data chunk before they report the size: check it first.
    if kind == Kind::Png
        && let Some((w, h)) = png_header_size(&bytes)
    {
        check_pixels(w, h, limits)?;
    }
    let (img, keep_original) = {
        let (mut decoder, keep_original) = open_decoder(&bytes, kind, limits)?;
        let (w, h) = decoder.dimensions();
        check_pixels(w, h, limits)?;
        let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
        let mut img = DynamicImage::from_decoder(decoder).map_err(decode_error)?;
        img.apply_orientation(orientation);
        (img, keep_original)
    };
    let longest = img.width().max(img.height());
    let (main, main_kind, shown) = if limits.resize && longest > limits.max_side && !keep_original {
        let small = img.resize(limits.max_side, limits.max_side, FilterType::CatmullRom);
        let main_kind = match kind {
            Kind::Png | Kind::Gif => Kind::Png,
            Kind::Jpeg => Kind::Jpeg,
            _ => photo_or_png(&small),
        };
        (encode(&small, main_kind)?, main_kind, small)
    } else {
        (bytes, kind, img)
    };
    let (width, height) = (shown.width(), shown.height());
    let thumbnail = if width.max(height) > limits.thumb_side {
        let thumb = shown.thumbnail(limits.thumb_side, limits.thumb_side);
        Some(encode(&thumb, photo_or_png(&thumb))?)
    } else {
        None
    };
    Ok(Prepared { main, main_kind, thumbnail, width, height })
}

/// The decoder for `kind`, and whether the original must be kept because it may be animated.
fn open_decoder<'a>(
    bytes: &'a [u8],
    kind: Kind,
    limits: &ImageLimits,
) -> Result<(Box<dyn ImageDecoder + 'a>, bool), BlobError> {
    let cursor = Cursor::new(bytes);
    let mut alloc = Limits::default();
    // Room for the largest allowed image at 16-bit RGBA, and never less than the crate's default.
    alloc.max_alloc = alloc.max_alloc.map(|default| default.max(limits.max_pixels.saturating_mul(8)));
    let (mut decoder, keep): (Box<dyn ImageDecoder + 'a>, bool) = match kind {
        Kind::Png => (Box::new(PngDecoder::with_limits(cursor, alloc.clone()).map_err(decode_error)?), false),
        Kind::Jpeg => (Box::new(JpegDecoder::new(cursor).map_err(decode_error)?), false),
        Kind::Gif => (Box::new(GifDecoder::new(cursor).map_err(decode_error)?), true),
        Kind::Webp => {
            let decoder = WebPDecoder::new(cursor).map_err(decode_error)?;
            let animated = decoder.has_animation();
            (Box::new(decoder), animated)
        }
        Kind::Pdf | Kind::Text | Kind::Other => return Err(BlobError::BadImage),
    };
    decoder.set_limits(alloc).map_err(decode_error)?;
    Ok((decoder, keep))
}

fn check_pixels(width: u32, height: u32, limits: &ImageLimits) -> Result<(), BlobError> {
    if width == 0 || height == 0 {
        return Err(BlobError::BadImage);
    }
    if u64::from(width) * u64::from(height) > limits.max_pixels {
        return Err(BlobError::ImageTooLarge);
    }
    Ok(())
}

/// Width and height from a PNG's IHDR chunk, which the format requires to come first.
fn png_header_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.get(12..16)? != b"IHDR" {
        return None;
    }
    let width = u32::from_be_bytes(bytes.get(16..20)?.try_into().ok()?);
    let height = u32::from_be_bytes(bytes.get(20..24)?.try_into().ok()?);
    Some((width, height))
}

fn decode_error(e: ImageError) -> BlobError {
    match e {
        ImageError::Limits(_) => BlobError::ImageTooLarge,
        _ => BlobError::BadImage,
    }
}

/// JPEG for opaque images (photos), PNG when there is transparency to keep.
fn photo_or_png(img: &DynamicImage) -> Kind {
    if img.has_alpha() { Kind::Png } else { Kind::Jpeg }
}

fn encode(img: &DynamicImage, kind: Kind) -> Result<Vec<u8>, BlobError> {
    let mut out = Vec::new();
    let result = if kind == Kind::Jpeg {
        JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY).encode_image(&img.to_rgb8())
    } else {
        img.write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
    };
    result.map_err(|_| BlobError::BadImage)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use image::{Rgb, RgbImage, Rgba, RgbaImage};

    fn encode_as(img: &DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    fn gradient(width: u32, height: u32) -> DynamicImage {
        DynamicImage::ImageRgb8(RgbImage::from_fn(width, height, |x, y| {
            Rgb([(x % 256) as u8, (y % 256) as u8, 128])
        }))
    }

    fn dimensions_of(bytes: &[u8]) -> (u32, u32) {
        let img = image::load_from_memory(bytes).unwrap();
        (img.width(), img.height())
    }

    /// CRC-32 (IEEE), for crafting valid PNG chunks.
    fn crc32(data: &[u8]) -> u32 {
        let mut crc = 0xffff_ffffu32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }

    fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&u32::try_from(data.len()).unwrap().to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    }

    /// A well-formed PNG header that claims `width`×`height` RGBA pixels, with one tiny data chunk.
    fn png_claiming(width: u32, height: u32) -> Vec<u8> {
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&width.to_be_bytes());
        ihdr.extend_from_slice(&height.to_be_bytes());
        ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
        png_chunk(&mut png, b"IHDR", &ihdr);
        png_chunk(&mut png, b"IDAT", &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
        png_chunk(&mut png, b"IEND", &[]);
        png
    }

    #[test]
    fn crc32_matches_the_check_value() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[tokio::test]
    async fn large_png_is_resized_with_a_thumbnail() {
        let original = encode_as(&gradient(4000, 3000), ImageFormat::Png);
        let prepared = prepare_image(original.clone(), Kind::Png, &ImageLimits::default()).await.unwrap();
        assert_eq!((prepared.width, prepared.height), (1920, 1440));
        assert_eq!(prepared.main_kind, Kind::Png);
        assert_eq!(Kind::sniff(&prepared.main), Kind::Png);
        assert_eq!(dimensions_of(&prepared.main), (1920, 1440));
        let thumb = prepared.thumbnail.as_deref().unwrap();
        let (tw, th) = dimensions_of(thumb);
        assert!(tw.max(th) <= 320 && tw.max(th) >= 300, "{tw}x{th}");
        assert_eq!(Kind::sniff(thumb), Kind::Jpeg, "an opaque thumbnail is a JPEG");
        assert!(format!("{prepared:?}").contains("main_len"));
    }

    #[tokio::test]
    async fn resize_off_keeps_the_original_bytes() {
        let original = encode_as(&gradient(2400, 600), ImageFormat::Png);
        let limits = ImageLimits { resize: false, ..ImageLimits::default() };
        let prepared = prepare_image(original.clone(), Kind::Png, &limits).await.unwrap();
        assert!(prepared.main == original, "bytes unchanged");
        assert_eq!(prepared.main_kind, Kind::Png);
        assert_eq!((prepared.width, prepared.height), (2400, 600));
        let (tw, th) = dimensions_of(prepared.thumbnail.as_deref().unwrap());
        assert_eq!((tw, th), (320, 80));
    }

    #[tokio::test]
    async fn small_images_are_kept_as_they_are() {
        let img = gradient(200, 100);
        for (format, kind) in [
            (ImageFormat::Png, Kind::Png),
            (ImageFormat::Jpeg, Kind::Jpeg),
            (ImageFormat::Gif, Kind::Gif),
            (ImageFormat::WebP, Kind::Webp),
        ] {
            let original = encode_as(&img, format);
            assert_eq!(Kind::sniff(&original), kind);
            let prepared = prepare_image(original.clone(), kind, &ImageLimits::default()).await.unwrap();
            assert!(prepared.main == original, "{kind:?}");
            assert_eq!(prepared.main_kind, kind);
            assert_eq!((prepared.width, prepared.height), (200, 100));
            assert!(prepared.thumbnail.is_none(), "already thumbnail-sized");
        }
    }

    #[tokio::test]
    async fn jpeg_stays_jpeg_and_webp_becomes_jpeg_or_png() {
        let limits = ImageLimits { max_side: 100, thumb_side: 50, ..ImageLimits::default() };
        let jpeg = encode_as(&gradient(400, 200), ImageFormat::Jpeg);
        let prepared = prepare_image(jpeg, Kind::Jpeg, &limits).await.unwrap();
        assert_eq!(prepared.main_kind, Kind::Jpeg);
        assert_eq!(Kind::sniff(&prepared.main), Kind::Jpeg);
        assert_eq!(dimensions_of(&prepared.main), (100, 50));

        let webp = encode_as(&gradient(400, 200), ImageFormat::WebP);
        let prepared = prepare_image(webp, Kind::Webp, &limits).await.unwrap();
        assert_eq!(prepared.main_kind, Kind::Jpeg, "opaque WebP becomes JPEG, not lossless WebP");
        assert_eq!(dimensions_of(&prepared.main), (100, 50));

        let transparent = DynamicImage::ImageRgba8(RgbaImage::from_pixel(400, 200, Rgba([1, 2, 3, 0])));
        let prepared =
            prepare_image(encode_as(&transparent, ImageFormat::WebP), Kind::Webp, &limits).await.unwrap();
        assert_eq!(prepared.main_kind, Kind::Png, "alpha is kept");
        assert_eq!(Kind::sniff(&prepared.main), Kind::Png);
        assert_eq!(Kind::sniff(prepared.thumbnail.as_deref().unwrap()), Kind::Png);
    }

    #[tokio::test]
    async fn gif_keeps_its_original_but_gets_a_thumbnail() {
        let limits = ImageLimits { max_side: 100, thumb_side: 50, ..ImageLimits::default() };
        let gif = encode_as(&gradient(300, 150), ImageFormat::Gif);
        let prepared = prepare_image(gif.clone(), Kind::Gif, &limits).await.unwrap();
        assert!(prepared.main == gif);
        assert_eq!(prepared.main_kind, Kind::Gif);
        assert_eq!((prepared.width, prepared.height), (300, 150));
        assert_eq!(dimensions_of(prepared.thumbnail.as_deref().unwrap()), (50, 25));
    }

    #[tokio::test]
    async fn huge_declared_png_is_refused_from_its_header() {
        let bomb = png_claiming(100_000, 100_000);
        assert_eq!(Kind::sniff(&bomb), Kind::Png);
        let result = prepare_image(bomb, Kind::Png, &ImageLimits::default()).await;
        assert!(matches!(result, Err(BlobError::ImageTooLarge)), "{result:?}");
        // Just over the limit is refused too; the limit is on pixels, not on a side.
        let limits = ImageLimits { max_pixels: 1_000_000, ..ImageLimits::default() };
        let result = prepare(png_claiming(1001, 1000), Kind::Png, &limits);
        assert!(matches!(result, Err(BlobError::ImageTooLarge)), "{result:?}");
    }

    #[tokio::test]
    async fn huge_declared_gif_and_jpeg_are_refused() {
        // GIF: the logical screen size is bytes 6..10, little-endian.
        let mut gif = encode_as(&gradient(2, 2), ImageFormat::Gif);
        gif[6..10].copy_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        let result = prepare_image(gif, Kind::Gif, &ImageLimits::default()).await;
        assert!(matches!(result, Err(BlobError::ImageTooLarge)), "{result:?}");
        // JPEG: height and width follow the SOF0 marker's length and precision.
        let mut jpeg = encode_as(&gradient(8, 8), ImageFormat::Jpeg);
        let sof = jpeg.windows(2).position(|w| w == [0xff, 0xc0]).unwrap();
        jpeg[sof + 5..sof + 9].copy_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        let result = prepare_image(jpeg, Kind::Jpeg, &ImageLimits::default()).await;
        assert!(matches!(result, Err(BlobError::ImageTooLarge)), "{result:?}");
    }

    #[tokio::test]
    async fn corrupt_images_are_bad_images() {
        let png = encode_as(&gradient(64, 64), ImageFormat::Png);
        let cut = png[..png.len() / 2].to_vec();
        let mut garbled = png.clone();
        for b in &mut garbled[40..] {
            *b ^= 0x5a;
        }
        let cases: Vec<(Vec<u8>, Kind)> = vec![
            (cut, Kind::Png),
            (garbled, Kind::Png),
            (b"\x89PNG\r\n\x1a\n<html>".to_vec(), Kind::Png),
            (b"\xff\xd8\xff garbage".to_vec(), Kind::Jpeg),
            (b"GIF89a".to_vec(), Kind::Gif),
            (b"RIFF\x04\0\0\0WEBP".to_vec(), Kind::Webp),
            (png_claiming(0, 10), Kind::Png),
            (png.clone(), Kind::Jpeg),
            (b"%PDF-1.7".to_vec(), Kind::Pdf),
            (b"hello".to_vec(), Kind::Text),
            (Vec::new(), Kind::Other),
        ];
        for (bytes, kind) in cases {
            let result = prepare_image(bytes, kind, &ImageLimits::default()).await;
            assert!(matches!(result, Err(BlobError::BadImage)), "{kind:?}: {result:?}");
        }
    }

    #[tokio::test]
    async fn exif_orientation_is_applied() {
        // A 40×20 JPEG whose EXIF says "rotate 90°": it is shown (and resized) as 20×40.
        let mut jpeg = encode_as(&gradient(40, 20), ImageFormat::Jpeg);
        let exif: &[u8] = b"Exif\0\0MM\0\x2a\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01\0\x06\0\0\0\0\0\0";
        let mut app1 = vec![0xff, 0xe1];
        app1.extend_from_slice(&u16::try_from(exif.len() + 2).unwrap().to_be_bytes());
        app1.extend_from_slice(exif);
        jpeg.splice(2..2, app1);
        let limits = ImageLimits { max_side: 20, thumb_side: 10, ..ImageLimits::default() };
        let prepared = prepare_image(jpeg, Kind::Jpeg, &limits).await.unwrap();
        assert_eq!((prepared.width, prepared.height), (10, 20));
        assert_eq!(dimensions_of(&prepared.main), (10, 20));
    }
}
